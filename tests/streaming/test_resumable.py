"""The resumable turn as a user's own loop meets it: ``awaken_s3.open_turn``, its events with
offsets, the commit, and a crash between two openings of the same key."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from awaken_s3 import (
    CheckpointPolicy,
    InMemoryStreamCheckpointStore,
    Message,
    ModelRequest,
    RetryPolicy,
    ScriptedProvider,
    TextChunk,
    ToolCallChunk,
    ToolCallReady,
    ToolCallStarted,
    TurnCompleted,
    TurnEvent,
    TurnFenced,
    TurnNotCompleted,
    TurnResumed,
    open_turn,
)
from awaken_s3.streaming.continuation import CONTINUE_INSTRUCTION
from awaken_s3.streaming.scripted import (
    Drop,
    Hook,
    ScriptStep,
    Stall,
    finish,
    text_deltas,
    text_turn,
    tool_call,
)

KEY = "my-run-1"
REQUEST = ModelRequest(model="scripted", messages=(Message.user("Count, please."),))
EAGER = CheckpointPolicy(min_interval=0.0, min_bytes=0)
QUICK = RetryPolicy(base_delay=0.0)
STORY = "One two three four five six seven eight nine ten eleven twelve. " * 5


class Screen:
    """What a user interface shows, built from the events with the offset rule only."""

    def __init__(self) -> None:
        self.text = ""
        self.resumes: list[TurnResumed] = []
        self.ready: list[str] = []
        self.arguments: dict[int, str] = {}

    def show(self, event: TurnEvent) -> None:
        if isinstance(event, TurnResumed):
            self.resumes.append(event)
            self.text = event.text
            self.arguments.clear()
        elif isinstance(event, TextChunk):
            assert event.offset == len(self.text), (event, self.text)
            self.text += event.text
        elif isinstance(event, ToolCallStarted):
            self.arguments[event.index] = ""
        elif isinstance(event, ToolCallChunk):
            assert event.offset == len(self.arguments[event.index])
            self.arguments[event.index] += event.arguments
        elif isinstance(event, ToolCallReady):
            self.ready.append(event.call.id)


async def stream(
    store: InMemoryStreamCheckpointStore,
    scripts: Sequence[Sequence[ScriptStep]],
    *,
    prefill: bool = True,
) -> tuple[Screen, TurnCompleted, ScriptedProvider]:
    provider = ScriptedProvider(scripts, prefill=prefill)
    turn = open_turn(store, KEY, provider, REQUEST, retry_policy=QUICK, checkpoint_policy=EAGER)
    screen = Screen()
    async for event in turn:
        screen.show(event)
    assert isinstance(turn.outcome, TurnCompleted), turn.outcome
    return screen, turn.outcome, provider


async def crash_after(
    store: InMemoryStreamCheckpointStore,
    script: Sequence[ScriptStep],
    saved_text: str,
    *,
    calls: int = 0,
) -> Screen:
    """Stream ``script`` (which stalls) until the checkpoint holds ``saved_text`` (and
    ``calls`` tool calls), then stop listening: the turn stops as a killed process would, its
    checkpoint kept."""
    turn = open_turn(store, KEY, ScriptedProvider([script]), REQUEST, checkpoint_policy=EAGER)
    screen = Screen()
    async for event in turn:
        screen.show(event)
        stored = await store.get(KEY)
        if (
            stored is not None
            and stored.checkpoint.partial_text == saved_text
            and sum(c.closed for c in stored.checkpoint.tool_calls) == calls
        ):
            break
    assert (await store.get(KEY)) is not None
    return screen


async def test_a_fresh_turn_streams_text_with_offsets_and_commit_deletes_the_checkpoint() -> None:
    store = InMemoryStreamCheckpointStore()
    screen, outcome, _ = await stream(store, [text_turn(STORY, chunk=7)])
    assert screen.resumes == [] and screen.text == STORY == outcome.message.text
    assert await store.get(KEY) is not None  # kept until the caller committed
    history: list[Message] = []
    turn = open_turn(store, "other", ScriptedProvider([text_turn("Hi.")]), REQUEST)
    await turn.commit(history.append)
    assert [m.text for m in history] == ["Hi."]
    assert await store.get("other") is None


@pytest.mark.parametrize("prefill", [True, False], ids=["prefill", "continue-message"])
async def test_a_rerun_with_the_same_script_resumes_and_gives_the_whole_text_once(
    prefill: bool,
) -> None:
    store = InMemoryStreamCheckpointStore()
    saved = STORY[:42]
    first = await crash_after(store, [*text_deltas(saved, chunk=6), Stall()], saved)
    assert first.text == saved

    # The user's test runs again with the very same script: the whole text, once.
    screen, outcome, provider = await stream(store, [text_turn(STORY, chunk=6)], prefill=prefill)
    assert outcome.message.text == STORY and outcome.plan_kind == "R1"
    assert screen.text == STORY
    resumed = screen.resumes[0]
    assert (resumed.plan, resumed.text, resumed.from_checkpoint) == ("R1", saved, True)
    sent = provider.requests[0].messages
    assert sent[-1 if prefill else -2].text == saved.rstrip()
    assert (sent[-1].text == CONTINUE_INSTRUCTION) is not prefill
    # The checkpoint stays cumulative: the resumed writer saved the whole text.
    stored = await store.get(KEY)
    assert stored is not None and stored.checkpoint.partial_text == STORY


async def test_a_second_resume_is_not_fenced_by_the_epoch_the_first_resume_wrote() -> None:
    store = InMemoryStreamCheckpointStore()
    await crash_after(store, [*text_deltas(STORY[:20]), Stall()], STORY[:20])
    await crash_after(store, [*text_deltas(STORY[:40]), Stall()], STORY[:40])
    stored = await store.get(KEY)
    assert stored is not None and stored.checkpoint.epoch == 1
    screen, outcome, _ = await stream(store, [text_turn(STORY)])
    assert outcome.message.text == STORY == screen.text
    assert outcome.retry_count == 2


async def test_a_resumed_writer_fences_the_one_before_it_without_a_lease() -> None:
    store = InMemoryStreamCheckpointStore()
    saved, release = asyncio.Event(), asyncio.Event()
    zombie_script: list[ScriptStep] = [
        *text_deltas(STORY[:30]),
        Hook(release.wait),
        # More stream after the lost put: the writer learns of the fence from its background
        # put, and the next event stops the turn.
        *text_deltas(" more" * 20, chunk=5),
        Stall(),
    ]
    zombie = open_turn(
        store, KEY, ScriptedProvider([zombie_script]), REQUEST, checkpoint_policy=EAGER
    )

    async def listen() -> None:
        async for _ in zombie:
            stored = await store.get(KEY)
            if stored is not None and stored.checkpoint.partial_text == STORY[:30]:
                saved.set()

    listening = asyncio.create_task(listen())
    await saved.wait()
    # Another process takes the turn over while the first one is still alive.
    newer = open_turn(
        store,
        KEY,
        ScriptedProvider([[*text_deltas(STORY), Stall()]]),
        REQUEST,
        checkpoint_policy=EAGER,
    )
    events = aiter(newer)
    first = await anext(events)
    assert isinstance(first, TurnResumed) and first.text == STORY[:30]
    assert isinstance(await anext(events), TextChunk)  # its first put precedes the model call
    # The first process wakes up and writes again: its conditional put loses, it stops.
    release.set()
    await listening
    assert isinstance(zombie.outcome, TurnFenced)
    stored = await store.get(KEY)
    assert stored is not None and stored.checkpoint.writer == newer.writer_id
    assert " more" not in stored.checkpoint.partial_text
    await events.aclose()  # type: ignore[attr-defined]


async def test_an_interruption_mid_arguments_drops_the_call_and_says_so() -> None:
    store = InMemoryStreamCheckpointStore()
    broken = tool_call(0, "get_weather", '{"city": "Pa', close=False)
    whole = tool_call(0, "get_weather", {"city": "Paris"}, call_id="call_b")
    screen, outcome, provider = await stream(
        store,
        [
            [*text_deltas("Let me check. "), *broken, Drop()],
            [*text_deltas("Let me check. "), *whole, *finish("tool_use")],
        ],
    )
    assert provider.calls == 2
    resumed = screen.resumes[0]
    assert resumed.plan == "R3" and not resumed.from_checkpoint
    assert [d.id for d in resumed.dropped] == ["call_0"]
    assert screen.text == "Let me check. " and screen.ready == ["call_b"]
    assert [c.id for c in outcome.message.tool_uses] == ["call_b"]


async def test_complete_calls_saved_by_a_dead_process_are_handed_back_without_a_model_call() -> (
    None
):
    store = InMemoryStreamCheckpointStore()
    calls = tool_call(0, "get_weather", {"city": "Oslo"}, call_id="call_o")
    await crash_after(store, [*text_deltas("Checking. "), *calls, Stall()], "Checking. ", calls=1)
    provider = ScriptedProvider([])
    turn = open_turn(store, KEY, provider, REQUEST)
    events = [event async for event in turn]
    assert provider.calls == 0
    assert isinstance(events[0], TurnResumed) and events[0].plan == "R2"
    assert [c.input for c in events[0].tool_calls] == [{"city": "Oslo"}]
    assert isinstance(turn.outcome, TurnCompleted)
    assert turn.outcome.message.text == "Checking. "


async def test_commit_saves_first_and_a_failed_save_keeps_the_checkpoint() -> None:
    store = InMemoryStreamCheckpointStore()

    def broken_save(message: Message) -> None:
        raise OSError("disk full")

    turn = open_turn(
        store, KEY, ScriptedProvider([text_turn(STORY)]), REQUEST, checkpoint_policy=EAGER
    )
    with pytest.raises(OSError):
        await turn.commit(broken_save)
    assert await store.get(KEY) is not None
    saved: list[Message] = []

    async def save(message: Message) -> None:
        saved.append(message)

    again = open_turn(store, KEY, ScriptedProvider([text_turn(STORY)]), REQUEST)
    await again.commit(save)
    assert [m.text for m in saved] == [STORY] and await store.get(KEY) is None


async def test_commit_refuses_a_turn_that_did_not_complete() -> None:
    store = InMemoryStreamCheckpointStore()
    from awaken_s3.streaming.errors import InvalidRequest
    from awaken_s3.streaming.scripted import Fail

    turn = open_turn(store, KEY, ScriptedProvider([[Fail(InvalidRequest("bad"))]]), REQUEST)
    outcome = await turn
    assert outcome.kind == "failed"
    with pytest.raises(TurnNotCompleted):
        await turn.commit(list[Message]().append)
    assert TurnFenced is not None
