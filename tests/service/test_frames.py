"""What a follower is owed from where it stands (pure), and the client's assembly by offset:
a follower brought from any position to any later picture, in any number of steps, holds
the committed text exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from awaken_s3.messages import Message, TextBlock, ToolUseBlock
from awaken_s3.service.frames import (
    MAX_FRAME_TEXT,
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


def test_long_text_is_split_into_frames_under_api_gateway_s_frame_size() -> None:
    text = "é" * (MAX_FRAME_TEXT * 2 + 5)
    frames = frames_from(Position(0), RunPicture("r1", turn=0, text=text))
    assert [len(str(f["text"])) for f, _ in frames] == [MAX_FRAME_TEXT, MAX_FRAME_TEXT, 5]
    assert all(len(str(f["text"]).encode()) * 1.1 < 32 * 1024 for f, _ in frames)


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
