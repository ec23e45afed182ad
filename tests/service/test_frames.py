"""What a follower is owed from where it stands (pure), and the client's assembly by offset:
a follower brought from any position to any later picture, in any number of steps, holds
the committed text exactly."""

from __future__ import annotations

import json
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from awaken_s3.messages import Message, TextBlock, ToolUseBlock
from awaken_s3.service import frames
from awaken_s3.service.frames import (
    FollowedText,
    Position,
    RunPicture,
    durable_text,
    frames_from,
    run_turns,
)
from awaken_s3.threads.models import RunSettings, RunState

CALL = ToolUseBlock(id="c1", name="lookup", input={"q": "x"})


def assistant(text: str, *calls: ToolUseBlock) -> Message:
    return Message(role="assistant", content=(TextBlock(text=text), *calls))


def kinds(frames: list[tuple[dict[str, object], Position]]) -> list[object]:
    return [frame["type"] for frame, _ in frames]


def test_a_follower_in_the_current_turn_gets_only_the_durable_text_past_its_offset() -> None:
    picture = RunPicture("r1", turn=0, text="Hello, world")
    ((frame, at),) = frames_from(Position(0, 7), picture)
    assert frame == {"type": "text", "run_id": "r1", "turn": 0, "offset": 7, "text": "world"}
    assert at == Position(0, 12)
    # Text a follower claims beyond what is durable is simply not sent (yet).
    assert frames_from(Position(0, 40), picture) == []


def test_a_follower_behind_gets_the_rest_of_committed_turns_then_the_current_one() -> None:
    picture = RunPicture(
        "r1", turn=1, committed={0: assistant("first turn", CALL)}, text="second", calls=()
    )
    frames = frames_from(Position(0, 6), picture)
    assert kinds(frames) == ["text", "tool_call", "turn_committed", "text"]
    assert frames[0][0]["text"] == "turn" and frames[1][0]["id"] == "c1"
    assert frames[1][0]["input_json"] == '{"q":"x"}'
    assert frames[2][0] == {
        "type": "turn_committed",
        "run_id": "r1",
        "turn": 0,
        "text_length": 10,
        "tool_calls": 1,
    }
    assert frames[3][1] == Position(1, 6)


def test_an_ended_run_ends_with_run_ended_and_nothing_after() -> None:
    picture = RunPicture("r1", turn=1, committed={0: assistant("done")}, ended="completed")
    frames = frames_from(Position(0, 2), picture)
    assert kinds(frames) == ["text", "turn_committed", "run_ended"]
    assert frames[-1][1].ended
    assert frames_from(frames[-1][1], picture) == []
    # A run cancelled mid-turn: its partial is never shown as committed, the end is.
    cancelled = RunPicture("r1", turn=0, ended="cancelled")
    assert kinds(frames_from(Position(0, 5), cancelled)) == ["run_ended"]


#: API Gateway's WebSocket frame size quota, in bytes
FRAME_QUOTA = 32 * 1024
#: characters that cost more than one byte as sent: escaped by JSON (quote, backslash,
#: control characters: up to 6 bytes) or wide in UTF-8 (2, 3, 4 bytes)
WIDE = '\x00"\\é€😀\n'


def sent_size(frame: dict[str, object]) -> int:
    return len(json.dumps(frame, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def test_every_frame_fits_api_gateway_s_frame_measured_in_encoded_bytes() -> None:
    text = WIDE * 20_000
    big = ToolUseBlock(id="call_0", name="store", input={"blob": WIDE * 30_000, "n": 1})
    picture = RunPicture("r1", turn=1, committed={0: assistant(text, big)}, ended="completed")
    frames = [frame for frame, _ in frames_from(Position(0), picture)]
    assert max(sent_size(frame) for frame in frames) <= FRAME_QUOTA
    assert len(frames) > 20  # the text and the input each took many frames
    view = FollowedText()
    for frame in frames:
        view.apply(json.loads(json.dumps(frame)))  # as a client decodes it
    ((call),) = view.calls_of(0)
    assert (call.id, call.name, call.input) == ("call_0", "store", big.input)
    assert (view.last_turn_text, view.gaps, view.status) == (text, [], "completed")


def test_a_tool_call_s_input_is_sent_as_json_text_in_pieces_by_offset() -> None:
    call = ToolUseBlock(id="c9", name="lookup", input={"q": "x", "a": [1, 2]})
    ((frame, at),) = frames_from(Position(0), RunPicture("r1", turn=0, calls=(call,)))
    assert frame == {
        "type": "tool_call",
        "run_id": "r1",
        "turn": 0,
        "index": 0,
        "id": "c9",
        "name": "lookup",
        "offset": 0,
        "input_length": 19,
        "input_json": '{"a":[1,2],"q":"x"}',
    }
    assert at == Position(0, calls=1)
    # A follower part-way through a call's input gets only the rest of it.
    ((rest, _),) = frames_from(
        Position(0, calls=0, call_offset=5), RunPicture("r1", 0, calls=(call,))
    )
    assert (rest["offset"], rest["input_json"]) == (5, '[1,2],"q":"x"}')


def test_a_tool_call_is_kept_per_turn_and_index_though_its_id_repeats() -> None:
    """Providers that send no call ids get ``call_0`` in every turn."""
    first = ToolUseBlock(id="call_0", name="lookup", input={"q": "first"})
    second = ToolUseBlock(id="call_0", name="lookup", input={"q": "second"})
    picture = RunPicture(
        "r1",
        turn=2,
        committed={0: assistant("", first), 1: assistant("", second)},
        ended="completed",
    )
    view = FollowedText()
    for frame, _ in frames_from(Position(0), picture):
        view.apply(frame)
    assert len(view.tool_calls) == 2
    assert [c.input for c in view.calls_of(0)] == [{"q": "first"}]
    assert [c.input for c in view.calls_of(1)] == [{"q": "second"}]


def test_whitespace_alone_is_never_shown_a_restart_may_replace_it() -> None:
    assert durable_text("  \n") == ""
    assert durable_text(" a") == " a"


def test_the_run_s_turns_are_its_last_assistant_messages() -> None:
    run = RunState("r2", "t1", "o", RunSettings(model="m"), turn=2, message_count=5)
    earlier = assistant("an earlier run's")
    mine = [assistant("zero"), assistant("one")]
    messages = [Message.user("a"), earlier, Message.user("b"), mine[0], mine[1], assistant("x")]
    assert run_turns(run, messages) == {0: mine[0], 1: mine[1]}


def test_the_client_keeps_only_characters_it_lacks_and_records_a_gap() -> None:
    view = FollowedText()
    view.apply({"type": "text", "turn": 0, "offset": 0, "text": "Hello"})
    assert view.apply({"type": "text", "turn": 0, "offset": 3, "text": "lo, you"}) == ", you"
    assert (view.text, view.repeated) == ("Hello, you", 2)
    view.apply({"type": "text", "turn": 0, "offset": 40, "text": "later"})
    assert view.gaps and view.text == "Hello, you"
    view.apply({"type": "turn_committed", "turn": 0})
    view.apply({"type": "text", "turn": 0, "offset": 0, "text": "Hello"})  # a late repeat
    view.apply({"type": "run_ended", "status": "completed"})
    view.apply({"type": "text", "turn": 1, "offset": 0, "text": "after the end"})
    assert (view.last_turn_text, view.turn, view.text, view.status) == (
        "Hello, you",
        1,
        "",
        "completed",
    )


@given(
    text=st.text(min_size=1, max_size=60).filter(lambda t: t.strip()),
    cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=6),
    start=st.integers(min_value=0, max_value=60),
)
def test_any_sequence_of_growing_pictures_assembles_the_committed_turn(
    text: str, cuts: list[int], start: int
) -> None:
    """Pictures grow as checkpoints land, then the turn commits; a follower starting at any
    offset it really has (and re-served from older positions, as after a crash) ends with
    the committed text exactly, having held only prefixes of it."""
    view = FollowedText()
    start = min(start, len(text))
    view.apply({"type": "text", "turn": 0, "offset": 0, "text": text[:start]})
    at = Position(0, start)
    for cut in sorted(cut % (len(text) + 1) for cut in cuts):
        picture = RunPicture("r1", turn=0, text=text[:cut] if text[:cut].strip() else "")
        for frame, reached in frames_from(Position(0, 0) if cut % 2 else at, picture):
            view.apply(frame)
            assert text.startswith(view.text)
            at = max(at, reached, key=lambda p: p.offset)
    final = RunPicture("r1", turn=1, committed={0: assistant(text)}, ended="completed")
    for frame, _ in frames_from(at, final):
        view.apply(frame)
    assert (view.last_turn_text, view.gaps, view.status) == (text, [], "completed")


@given(
    text=st.text(st.characters(exclude_categories=()), max_size=300),
    starts=st.lists(st.integers(min_value=0, max_value=400), max_size=4),
)
def test_any_input_sent_in_small_frames_and_sent_again_assembles_exactly(
    text: str, starts: list[int]
) -> None:
    """With frames of 160 bytes, an input of any characters (a lone surrogate too) goes in
    many pieces; a follower re-served from any offset it holds (after a crash) ends with the
    input exactly, every frame within the bound."""
    call = ToolUseBlock(id="c", name="n", input={"s": text})
    picture = RunPicture("r1", turn=0, calls=(call,))
    view = FollowedText()
    held = 0
    with mock.patch.object(frames, "MAX_FRAME_BYTES", 160):
        for start in [0, *starts]:
            at = Position(0, call_offset=min(start, held))
            for frame, _ in frames_from(at, picture):
                assert len(frames.encode_frame(frame)) <= 160
                view.apply(json.loads(json.dumps(frame)))
            (followed,) = view.calls_of(0)
            held = len(followed.input_json)
    assert (followed.complete, followed.input, view.gaps) == (True, {"s": text}, [])
