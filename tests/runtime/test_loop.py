"""The run loop over the real TurnRunner, in memory: lifecycle, tools, checkpoints, endings."""

from __future__ import annotations

import dataclasses

import pytest

from awaken_s3.messages import Message, ToolResultBlock
from awaken_s3.models import PartialToolCall, StreamCheckpoint
from awaken_s3.runtime.loop import STEP_LIMIT, RunEnd
from awaken_s3.runtime.tools import Tool, ToolRegistry
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.errors import ContextOverflow
from awaken_s3.streaming.outcome import Usage
from awaken_s3.streaming.scripted import Fail, ScriptedProvider, text_turn
from awaken_s3.threads import RunStatus, ThreadStore
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import SETTINGS, seed_run
from tests.runtime.conftest import LEASE, LoopFactory
from tests.runtime.scripts import (
    ADD_SCHEMA,
    Effects,
    TurnAwareProvider,
    TurnSpec,
    adding_registry,
    expected_thread,
    tool_turns,
)

PROMPT = "add things up"


async def test_text_run_completes_and_leaves_no_checkpoint(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    provider = ScriptedProvider([text_turn("Hello there, friend.")])
    result = await make_loop(provider, adding_registry(Effects())).run("r1")
    assert result.end == RunEnd.COMPLETED and not result.should_continue
    assert result.turns_committed == 1
    assert await threads.load_messages("t1") == [
        Message.user(PROMPT),
        Message.assistant("Hello there, friend."),
    ]
    run = await threads.get_run("r1")
    assert (run.status, run.turn, run.usage, run.lease.owner) == (
        RunStatus.COMPLETED,
        1,
        Usage(10, 20),
        None,
    )
    assert await checkpoints.get("r1") is None
    sent = provider.requests[0]
    assert (sent.model, sent.system, [t.name for t in sent.tools]) == (
        "scripted-1",
        "be brief",
        ["add"],
    )


async def test_tool_turns_run_each_tool_once_and_feed_results_back(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    effects = Effects()
    turns = tool_turns(3)
    provider = TurnAwareProvider(turns)
    result = await make_loop(provider, adding_registry(effects)).run("r1")
    assert result.end == RunEnd.COMPLETED
    assert (result.turns_committed, result.tool_calls) == (4, 3)
    assert effects.all() == ["add:0", "add:1", "add:2"]
    assert await threads.load_messages("t1") == expected_thread(PROMPT, turns, ["1", "2", "3"])
    # The model saw each result before its next turn.
    assert provider.requests[1].messages[-1].content[0] == ToolResultBlock(
        tool_use_id="call-0", content="1"
    )


async def test_tool_failures_become_error_results(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    ran: list[str] = []

    async def explode(a: int, b: int) -> str:
        ran.append("explode")
        raise RuntimeError("disk on fire")

    registry = ToolRegistry([Tool("add", "", ADD_SCHEMA, explode)])
    turns = [
        TurnSpec("bad input", (("c1", "add", {"a": "one", "b": 2}),)),
        TurnSpec("unknown", (("c2", "nope", {}),)),
        TurnSpec("raises", (("c3", "add", {"a": 1, "b": 2}),)),
        TurnSpec("ok then"),
    ]
    result = await make_loop(TurnAwareProvider(turns), registry).run("r1")
    assert result.end == RunEnd.COMPLETED
    assert ran == ["explode"]  # the schema violation and the unknown tool never ran
    messages = await threads.load_messages("t1")
    results = [m.content[0] for m in messages if m.role == "user"][1:]
    assert all(isinstance(r, ToolResultBlock) and r.is_error for r in results)
    assert "a: 'one' is not of type 'integer'" in results[0].content  # type: ignore[union-attr]
    assert "tool 'nope' is not enabled for this run" in results[1].content  # type: ignore[union-attr]
    # The thread is the caller's to read: an exception's own text stays in the log.
    assert results[2].content == "tool 'add' failed with an internal error"  # type: ignore[union-attr]


def _guarded_registry(effects: Effects, ran: list[str]) -> ToolRegistry:
    """``add`` (the run's tool) and ``wipe``, registered in the worker but not enabled."""
    registry = adding_registry(effects)

    def wipe() -> str:
        ran.append("wipe")
        return "wiped"

    registry.add(Tool("wipe", "Delete everything.", {"type": "object"}, wipe))
    return registry


async def test_a_model_calling_a_tool_its_run_did_not_enable_is_refused(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    ran: list[str] = []
    effects = Effects()
    turns = [
        TurnSpec("Cleaning up.", (("c1", "wipe", {}), ("c2", "add", {"a": 1, "b": 1}))),
        TurnSpec("Done."),
    ]
    provider = TurnAwareProvider(turns)
    result = await make_loop(provider, _guarded_registry(effects, ran)).run("r1")
    assert result.end == RunEnd.COMPLETED
    assert ran == [] and effects.all() == ["add:1"]
    # Only the enabled tool was offered, and the refusal is what the model read next.
    assert [t.name for t in provider.requests[0].tools] == ["add"]
    assert provider.requests[1].messages[-1].content == (
        ToolResultBlock(
            tool_use_id="c1", content="tool 'wipe' is not enabled for this run", is_error=True
        ),
        ToolResultBlock(tool_use_id="c2", content="2"),
    )
    assert await threads.get_tool_call("r1", "c1", turn=1) is None


async def test_a_synthesised_turn_from_a_checkpoint_cannot_run_a_tool_the_run_did_not_enable(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, make_loop: LoopFactory
) -> None:
    # A checkpoint (forged, or from a model that named the tool) holding a complete call to a
    # registered tool the run never enabled: R2 synthesises the turn without asking the model.
    await seed_run(threads, prompt=PROMPT)
    forged = StreamCheckpoint(
        run_id="r1",
        thread_id="t1",
        model="scripted-1",
        turn=0,
        partial_text="Let me tidy up.",
        tool_calls=(PartialToolCall(index=0, id="c1", name="wipe", arguments="{}", closed=True),),
        epoch=0,
    )
    await checkpoints.put(forged, expected_version=None)
    ran: list[str] = []
    provider = TurnAwareProvider([TurnSpec("unused"), TurnSpec("Nothing was wiped.")])
    result = await make_loop(provider, _guarded_registry(Effects(), ran)).run("r1")
    assert result.end == RunEnd.COMPLETED
    assert ran == []
    assert await threads.get_tool_call("r1", "c1", turn=1) is None
    messages = await threads.load_messages("t1")
    assert messages[2].content == (
        ToolResultBlock(
            tool_use_id="c1", content="tool 'wipe' is not enabled for this run", is_error=True
        ),
    )
    assert len(provider.requests) == 1  # turn 0 was synthesised; only turn 1 asked the model


async def test_stale_checkpoint_is_deleted_not_replayed(
    threads: ThreadStore,
    checkpoints: StreamCheckpointStore,
    make_loop: LoopFactory,
) -> None:
    await seed_run(threads, prompt=PROMPT)
    turns = tool_turns(1)
    # A worker committed turn 0 (and ran its tool) but died before deleting its checkpoint.
    run = await threads.claim_run("r1", worker="dead", lease_seconds=LEASE)
    from awaken_s3.threads import TurnCommit

    expected = expected_thread(PROMPT, turns, ["1"])
    run = (await threads.commit_turn(TurnCommit(base=run, messages=(expected[1],)))).run
    await threads.release_lease("r1", worker="dead", epoch=run.lease.epoch)
    stale = StreamCheckpoint(
        run_id="r1",
        thread_id="t1",
        model="scripted-1",
        turn=0,
        partial_text="Step 0: adding",
        tool_calls=(
            PartialToolCall(
                index=0, id="call-0", name="add", arguments='{"a": 0, "b": 1}', closed=True
            ),
        ),
        epoch=run.lease.epoch,
        writer="dead",
    )
    await checkpoints.put(stale, expected_version=None)
    effects = Effects()
    provider = TurnAwareProvider(turns)
    result = await make_loop(provider, adding_registry(effects)).run("r1")
    assert result.end == RunEnd.COMPLETED
    assert await threads.load_messages("t1") == expected
    assert effects.all() == ["add:0"]
    # Only the final turn was asked of the model, from committed history, with no prefix.
    assert len(provider.requests) == 1
    assert provider.requests[0].messages[-1].role == "user"
    assert await checkpoints.get("r1") is None


async def test_interrupted_turn_resumes_from_its_checkpoint(
    threads: ThreadStore,
    checkpoints: StreamCheckpointStore,
    make_loop: LoopFactory,
) -> None:
    await seed_run(threads, prompt=PROMPT)
    saved = StreamCheckpoint(
        run_id="r1", thread_id="t1", model="scripted-1", turn=0, partial_text="All done", epoch=0
    )
    await checkpoints.put(saved, expected_version=None)
    provider = TurnAwareProvider([TurnSpec("All done, thank you.")])
    result = await make_loop(provider, adding_registry(Effects())).run("r1")
    assert result.end == RunEnd.COMPLETED
    messages = await threads.load_messages("t1")
    assert messages[-1] == Message.assistant("All done, thank you.")  # prefix + continuation
    assert provider.requests[0].messages[-1] == Message.assistant("All done")
    assert await checkpoints.get("r1") is None


async def test_deadline_suspends_and_the_next_invocation_continues(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    effects = Effects()
    turns = tool_turns(2)
    mono = FakeClock(1000.0)

    async def pause(turn: int, index: int) -> None:
        if turn == 1 and index == 2:
            mono.advance(60)  # the Lambda deadline passes in the middle of turn 1

    loop = make_loop(
        TurnAwareProvider(turns, pause=pause), adding_registry(effects), monotonic=mono
    )
    first = await loop.run("r1", deadline=mono.now + 30)
    assert first.end == RunEnd.SUSPENDED and first.should_continue
    assert first.turns_committed == 1
    run = await threads.get_run("r1")
    assert (run.status, run.lease.owner, run.turn) == (RunStatus.SUSPENDED, None, 1)
    # The next invocation claims at once (no lease to wait out) and finishes the run.
    second = await make_loop(TurnAwareProvider(turns), adding_registry(effects), worker="w2").run(
        "r1"
    )
    assert second.end == RunEnd.COMPLETED
    assert await threads.load_messages("t1") == expected_thread(PROMPT, turns, ["1", "2"])
    assert effects.all() == ["add:0", "add:1"]


async def test_near_its_deadline_an_invocation_hands_over_instead_of_starting_a_turn(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    # A turn cut at the deadline is resumed by a call that sends the thread again with the
    # partial turn; handing over between steps costs only the next invocation. So once it
    # has made progress, an invocation does not start a model turn within the headroom.
    await seed_run(threads, prompt=PROMPT)
    effects = Effects()
    turns = tool_turns(2)
    mono = FakeClock(1000.0)

    async def slow_first_turn(turn: int, index: int) -> None:
        if turn == 0 and index == 2:
            mono.advance(25)  # 5 s left after turn 0: inside the 10 s headroom

    provider = TurnAwareProvider(turns, pause=slow_first_turn)
    loop = make_loop(provider, adding_registry(effects), monotonic=mono, turn_headroom=10)
    first = await loop.run("r1", deadline=mono.now + 30)
    assert first.end == RunEnd.SUSPENDED
    # Its tool call is not started either: a call is cut at the deadline, and a cut call that
    # is not idempotent could only be answered "outcome unknown".
    assert (first.turns_committed, first.tool_calls) == (1, 0)
    assert len(provider.requests) == 1
    # The next invocation starts the call even with less time left than the headroom: it has
    # made no progress yet, and a hand-over could only repeat. Then it has, and hands over.
    second = make_loop(
        provider, adding_registry(effects), worker="w2", monotonic=mono, turn_headroom=10
    )
    tools = await second.run("r1", deadline=mono.now + 5)
    assert (tools.end, tools.turns_committed, tools.tool_calls) == (RunEnd.SUSPENDED, 0, 1)
    # The one after starts turn 1 afresh (no prefix to send), by the same rule.
    third = make_loop(
        provider, adding_registry(effects), worker="w3", monotonic=mono, turn_headroom=10
    )
    after = await third.run("r1", deadline=mono.now + 5)
    assert after.turns_committed == 1
    assert provider.requests[1].messages[-1].role == "user"  # a fresh turn, not a continuation
    last = await make_loop(provider, adding_registry(effects), worker="w4").run("r1")
    assert last.end == RunEnd.COMPLETED
    assert await threads.load_messages("t1") == expected_thread(PROMPT, turns, ["1", "2"])
    assert all(r.messages[-1].role == "user" for r in provider.requests)  # nothing was cut


async def test_permanent_error_fails_the_run_with_its_classification(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    provider = ScriptedProvider([[Fail(ContextOverflow("prompt is too long", status=400))]])
    result = await make_loop(provider, adding_registry(Effects())).run("r1")
    assert result.end == RunEnd.FAILED
    run = await threads.get_run("r1")
    assert run.status == RunStatus.FAILED and run.lease.owner is None
    assert run.error is not None and run.error.code == "context_overflow"
    assert not run.error.retryable
    assert provider.calls == 1  # never retried
    assert await threads.load_messages("t1") == [Message.user(PROMPT)]


async def test_step_limit_fails_the_run(threads: ThreadStore, make_loop: LoopFactory) -> None:
    await seed_run(threads, prompt=PROMPT, settings=dataclasses.replace(SETTINGS, max_turns=2))
    effects = Effects()
    result = await make_loop(TurnAwareProvider(tool_turns(5)), adding_registry(effects)).run("r1")
    assert result.end == RunEnd.FAILED
    run = await threads.get_run("r1")
    assert run.error is not None and run.error.code == STEP_LIMIT
    assert run.turn == 2 and effects.all() == ["add:0", "add:1"]
    # The results of the last tool turn are committed: the thread stays well-formed.
    assert (await threads.load_messages("t1"))[-1].role == "user"


async def test_cancel_during_a_turn_discards_it(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    cancelled: list[RunStatus] = []

    async def pause(turn: int, index: int) -> None:
        if turn == 1 and index == 1:
            cancelled.append((await threads.cancel_run("r1")).status)

    effects = Effects()
    result = await make_loop(
        TurnAwareProvider(tool_turns(3), pause=pause), adding_registry(effects)
    ).run("r1")
    assert cancelled == [RunStatus.CANCELLED]
    assert result.end == RunEnd.CANCELLED
    run = await threads.get_run("r1")
    assert (run.status, run.turn, run.lease.owner) == (RunStatus.CANCELLED, 1, None)
    assert effects.all() == ["add:0"]
    assert len(await threads.load_messages("t1")) == 3  # prompt, turn 0, its results


async def test_a_held_run_is_busy_and_an_ended_run_is_not_runnable(
    threads: ThreadStore, make_loop: LoopFactory, clock: FakeClock
) -> None:
    await seed_run(threads, prompt=PROMPT)
    await threads.claim_run("r1", worker="other", lease_seconds=LEASE)
    clock.advance(10)
    provider = TurnAwareProvider([TurnSpec("hi")])
    tools = adding_registry(Effects())
    busy = await make_loop(provider, tools).run("r1")
    assert busy.end == RunEnd.BUSY and busy.retry_after == pytest.approx(LEASE - 10)
    assert provider.requests == []
    clock.advance(LEASE)
    assert (await make_loop(provider, tools).run("r1")).end == RunEnd.COMPLETED
    again = await make_loop(provider, tools).run("r1")
    assert again.end == RunEnd.NOT_RUNNABLE and len(provider.requests) == 1


async def test_a_run_asking_for_a_missing_tool_fails_clearly(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    provider = TurnAwareProvider([TurnSpec("hi")])
    result = await make_loop(provider, ToolRegistry()).run("r1")
    assert result.end == RunEnd.FAILED
    assert result.error is not None and result.error.code == "unknown_tool"
    assert provider.requests == []


async def test_a_second_run_on_a_thread_sees_the_whole_history(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    first = TurnAwareProvider([TurnSpec("First answer.")])
    assert (await make_loop(first, adding_registry(Effects())).run("r1")).end == RunEnd.COMPLETED
    await threads.create_run(
        "r2", thread_id="t1", owner="alice", settings=SETTINGS, messages=[Message.user("again")]
    )
    second = TurnAwareProvider([TurnSpec("unused"), TurnSpec("Second answer.")])
    assert (await make_loop(second, adding_registry(Effects())).run("r2")).end == RunEnd.COMPLETED
    assert second.requests[0].messages == (
        Message.user(PROMPT),
        Message.assistant("First answer."),
        Message.user("again"),
    )
    assert [m.text for m in await threads.load_messages("t1")] == [
        PROMPT,
        "First answer.",
        "again",
        "Second answer.",
    ]
