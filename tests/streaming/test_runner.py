"""The turn runner: every R1-R4 row, and the rules a resumed turn keeps (the whole turn
committed, cumulative checkpoints, capped hints, permanent errors, the prefill fallback, the
interruption budget)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest

from awaken_s3.messages import Message, TextBlock, ToolUseBlock
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint, encode_checkpoint
from awaken_s3.streaming import errors as e
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.continuation import CONTINUE_INSTRUCTION
from awaken_s3.streaming.events import StreamEvent, TextDelta, UsageEvent
from awaken_s3.streaming.outcome import (
    TurnCompleted,
    TurnFailed,
    TurnFenced,
    TurnOutcome,
    TurnSuspended,
)
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import ATTEMPT_LOST, TurnRunner
from awaken_s3.streaming.scripted import (
    Drop,
    Fail,
    Hook,
    ScriptedProvider,
    Stall,
    finish,
    interleave,
    text_deltas,
    text_turn,
    tool_call,
)
from tests.fixtures.clock import FakeClock

from .conftest import (
    HISTORY,
    REQUEST,
    RUN_ID,
    CountingStore,
    RecordingSleep,
    eventually,
    make_runner,
    run,
    saved,
)
from .test_recovery import call


async def plant(store: CountingStore, checkpoint: StreamCheckpoint) -> str:
    return await store.put(checkpoint, expected_version=None)


async def stored_checkpoint(store: CountingStore) -> StreamCheckpoint:
    stored = await store.get(RUN_ID)
    assert stored is not None
    return stored.checkpoint


def completed(outcome: object) -> TurnCompleted:
    assert isinstance(outcome, TurnCompleted), outcome
    return outcome


def failed(outcome: object) -> TurnFailed:
    assert isinstance(outcome, TurnFailed), outcome
    return outcome


def fenced(outcome: object) -> TurnFenced:
    assert isinstance(outcome, TurnFenced), outcome
    return outcome


class RunRecord:
    """Stands in for the run record's answer to "does our epoch still hold the lease?"."""

    def __init__(self, ours: bool) -> None:
        self.ours = ours
        self.asked = 0

    async def __call__(self) -> bool:
        self.asked += 1
        return self.ours


# -- a fresh turn -------------------------------------------------------------------


async def test_a_clean_turn_returns_text_tool_calls_usage_and_no_plan(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider(
        [[*text_deltas("Let me look."), *tool_call(0, "lookup", {"q": "x"}), *finish("tool_use")]]
    )
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.message == Message(
        role="assistant",
        content=(
            TextBlock(text="Let me look."),
            ToolUseBlock(id="call_0", name="lookup", input={"q": "x"}),
        ),
    )
    assert outcome.stop_reason == "tool_use"
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (10, 20)
    assert outcome.plan_kind is None and outcome.retry_count == 0
    assert provider.requests == [REQUEST]
    assert outcome.checkpoint_stats.puts >= 1


# -- R1-R4 from a checkpoint left by a dead process -----------------------------------


async def test_r1_resume_sends_the_prefix_and_returns_the_whole_turn(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(partial_text="The answer is"))
    provider = ScriptedProvider([text_turn(" 42, as computed.")], prefill=True)
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.plan_kind == "R1"
    # Rule 1: prefix + continuation, never only the continuation.
    assert outcome.message.text == "The answer is 42, as computed."
    assert list(provider.requests[0].messages) == [*HISTORY, Message.assistant("The answer is")]
    assert outcome.retry_count == 1


async def test_r2_resume_synthesizes_the_turn_without_a_model_call(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    version = await plant(
        store,
        saved(
            partial_text="Checking both.",
            tool_calls=(call(0, '{"a": 1}'), call(1, '{"b": [1, ', closed=False)),
        ),
    )
    provider = ScriptedProvider([])  # any model call would fail the test
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert provider.calls == 0
    assert outcome.plan_kind == "R2" and outcome.stop_reason == "tool_use"
    assert outcome.message.content == (
        TextBlock(text="Checking both."),
        ToolUseBlock(id="call_0", name="lookup", input={"a": 1}),
    )
    assert [d.index for d in outcome.dropped_tool_calls] == [1]
    assert outcome.checkpoint_version == version


async def test_r3_resume_drops_every_broken_call_and_continues_from_the_text(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(
        store,
        saved(
            partial_text="I will call two tools",
            tool_calls=(call(0, '{"x": ', closed=False), call(1, "{oops}", closed=True)),
        ),
    )
    provider = ScriptedProvider([text_turn(" after all, no: here is the answer.")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.plan_kind == "R3"
    assert outcome.message.text == "I will call two tools after all, no: here is the answer."
    assert outcome.message.tool_uses == ()
    assert sorted(d.index for d in outcome.dropped_tool_calls) == [0, 1]
    assert provider.requests[0].messages[-1] == Message.assistant("I will call two tools")
    # The resume write already holds only the text: a second crash plans R1, not R3 again.
    resume_write = store.history[1]
    assert resume_write.tool_calls == () and resume_write.partial_text == "I will call two tools"


@pytest.mark.parametrize("text", ["", "  \n"])
async def test_r4_resume_restarts_the_request_without_a_prefix(
    text: str, store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(partial_text=text, tool_calls=(call(0, '{"q', closed=False),)))
    provider = ScriptedProvider([text_turn("Fresh answer.")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.plan_kind == "R4"
    assert provider.requests == [REQUEST]
    assert outcome.message.text == "Fresh answer."
    assert [d.index for d in outcome.dropped_tool_calls] == [0]


# -- rule 2: cumulative checkpoints; a second crash loses nothing ---------------------


async def test_after_an_r1_resume_checkpoints_hold_prefix_plus_new_text(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(partial_text="Part one."))
    provider = ScriptedProvider([[TextDelta(" Part"), TextDelta(" two."), Drop()], text_turn("!")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    written = [c.partial_text for c in store.history[1:]]
    assert written[0] == "Part one."  # the resume write: new epoch, writer, retry count
    assert "Part one. Part two." in written
    assert all(t.startswith("Part one.") for t in written)
    assert outcome.message.text == "Part one. Part two.!"


async def crash_after(
    provider_events: int, runner_coro: Awaitable[TurnOutcome], provider: ScriptedProvider
) -> None:
    """Run until the provider handed out ``provider_events`` events, then kill the task."""
    task = asyncio.ensure_future(runner_coro)
    await eventually(lambda: provider.events_sent >= provider_events or task.done())
    for _ in range(5):  # let the background puts of those events land
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_second_crash_right_after_an_r1_resume_loses_nothing(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(partial_text="Alpha."))
    # Process 2 resumes, streams some text, and dies mid-stream.
    second = ScriptedProvider([[TextDelta(" Beta"), TextDelta("."), Stall()]])
    await crash_after(2, run(make_runner(second, store, clock, sleep, writer_id="w2")), second)
    after_second = await stored_checkpoint(store)
    assert after_second.partial_text == "Alpha. Beta."
    assert after_second.retry_count == 1
    # Process 3 dies right after resuming, before the model says anything.
    third = ScriptedProvider([[Stall()]])
    await crash_after(0, run(make_runner(third, store, clock, sleep, writer_id="w3")), third)
    after_third = await stored_checkpoint(store)
    assert after_third.partial_text == "Alpha. Beta."
    assert after_third.retry_count == 2 and after_third.writer == "w3"
    # Process 4 finishes the turn: nothing of attempts 1 and 2 is lost.
    fourth = ScriptedProvider([text_turn(" Gamma.")])
    outcome = completed(await run(make_runner(fourth, store, clock, sleep, writer_id="w4")))
    assert outcome.message.text == "Alpha. Beta. Gamma."
    assert fourth.requests[0].messages[-1] == Message.assistant("Alpha. Beta.")
    assert outcome.retry_count == 3


# -- rule 3: continuation-only messages are request-only ------------------------------


async def test_the_continue_request_never_reaches_the_returned_turn(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider(
        [[*text_deltas("First half, "), Drop()], text_turn("second half.")], prefill=False
    )
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    sent = provider.requests[1].messages
    assert sent[-1] == Message.user(CONTINUE_INSTRUCTION)
    assert sent[-2] == Message.assistant("First half,")
    assert outcome.message.role == "assistant"
    assert outcome.message.content == (TextBlock(text="First half, second half."),)
    assert CONTINUE_INSTRUCTION not in outcome.message.text
    assert list(REQUEST.messages) == list(HISTORY)


# -- rule 4: only complete JSON objects are executed; all dropped calls reported -------


async def test_in_process_interruption_with_parallel_calls_keeps_only_complete_ones(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    calls = interleave(
        tool_call(0, "a", {"x": 1}),
        tool_call(1, "b", '{"y": [1, 2', close=False),
        tool_call(2, "c", "", close=True),
        tool_call(3, "d", "", close=False),
    )
    provider = ScriptedProvider([[TextDelta("Running tools."), *calls, Drop()]])
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert provider.calls == 1  # R2 in-process: no second model call
    assert outcome.stop_reason == "tool_use"
    assert outcome.message.content == (
        TextBlock(text="Running tools."),
        ToolUseBlock(id="call_0", name="a", input={"x": 1}),
        ToolUseBlock(id="call_2", name="c", input={}),
    )
    assert [d.index for d in outcome.dropped_tool_calls] == [1, 3]
    assert outcome.retry_count == 1


async def test_a_completed_stream_still_drops_an_unclosed_call(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider(
        [[*tool_call(0, "a", '{"k": "v"'), *tool_call(1, "b", "{}"), *finish("tool_use")]]
    )
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert [b.id for b in outcome.message.tool_uses] == ["call_1"]
    assert [d.id for d in outcome.dropped_tool_calls] == ["call_0"]


async def test_in_process_r3_reports_the_dropped_calls_of_the_interrupted_attempt(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider(
        [
            [TextDelta("Thinking"), *tool_call(0, "a", '{"p": ', close=False), Drop()],
            text_turn(" done."),
        ]
    )
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.message.content == (TextBlock(text="Thinking done."),)
    assert [d.index for d in outcome.dropped_tool_calls] == [0]


# -- rule 5: the runner never deletes; it hands back the version for the caller ---------


async def test_the_checkpoint_survives_completion_for_a_delete_after_commit(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider([text_turn("A complete answer.")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    stored = await store.get(RUN_ID)
    assert stored is not None and store.deletes == 0
    assert outcome.checkpoint_version == stored.version
    await store.delete(RUN_ID, expected_version=outcome.checkpoint_version)  # what the caller does
    assert await store.get(RUN_ID) is None


# -- rule 6: hints honoured only when present, capped at 60 s --------------------------


@pytest.mark.parametrize(("hint", "expected"), [(120.0, 60.0), (3.0, 3.0), (0.0, 0.0)])
async def test_a_throttling_hint_mid_stream_is_honoured_and_capped(
    hint: float,
    expected: float,
    store: CountingStore,
    clock: FakeClock,
    sleep: RecordingSleep,
) -> None:
    provider = ScriptedProvider(
        [[TextDelta("Part"), Fail(e.Throttled("429", retry_after=hint))], text_turn(" two")]
    )
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert sleep.delays == [expected]
    assert outcome.message.text == "Part two"


async def test_without_a_hint_the_runner_backs_off_with_jitter(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider(
        [[Fail(e.ServerError("502"))], [Fail(e.Overloaded("529"))], text_turn("ok")]
    )
    policy = RetryPolicy(base_delay=2.0, max_delay=30.0, idle_timeout=5)
    completed(await run(make_runner(provider, store, clock, sleep, retry=policy)))
    assert len(sleep.delays) == 2
    assert 0 <= sleep.delays[0] <= 2.0 and 0 <= sleep.delays[1] <= 4.0


# -- rule 7: permanent errors are not retried, even with a checkpoint ------------------


async def test_a_permanent_error_is_not_retried_even_with_a_checkpoint(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(partial_text="Long context so far"))
    provider = ScriptedProvider([[Fail(e.ContextOverflow("prompt is too long"))], text_turn("x")])
    outcome = failed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.error.code == "context_overflow"
    assert not outcome.error.retryable
    assert provider.calls == 1 and sleep.delays == []


async def test_a_permanent_error_mid_stream_fails_the_turn_and_keeps_the_partial(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider([[TextDelta("Some text"), Fail(e.ContentFiltered("blocked"))]])
    outcome = failed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.error.code == "content_filtered"
    assert (await stored_checkpoint(store)).partial_text == "Some text"


async def test_an_unmapped_exception_fails_as_unexpected(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep, caplog: pytest.LogCaptureFixture
) -> None:
    def adapter_bug() -> None:
        raise KeyError("bug")

    provider = ScriptedProvider([[TextDelta("x"), Hook(adapter_bug)]])
    outcome = failed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.error.code == "unexpected_error" and "KeyError" in outcome.error.message
    assert sleep.delays == []


# -- rule 8: prefill is a capability ---------------------------------------------------


async def test_without_prefill_the_continuation_echo_is_trimmed(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(partial_text="Oslo is the capital of Norway. It lies"))
    provider = ScriptedProvider([text_turn("It lies at the head of the Oslofjord.")], prefill=False)
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert provider.requests[0].messages[-1] == Message.user(CONTINUE_INSTRUCTION)
    assert (
        outcome.message.text
        == "Oslo is the capital of Norway. It lies at the head of the Oslofjord."
    )


async def test_a_rejected_prefill_falls_back_to_the_continue_message(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(partial_text="Half"))
    provider = ScriptedProvider(
        [[Fail(e.PrefillRejected("final assistant message not supported"))], text_turn(" done")],
        prefill=True,
    )
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert provider.requests[0].messages[-1] == Message.assistant("Half")
    assert provider.requests[1].messages[-1] == Message.user(CONTINUE_INSTRUCTION)
    assert outcome.message.text == "Half done"
    assert outcome.retry_count == 1 and sleep.delays == []  # only the crash counted


# -- rule 9: the retry count is in the checkpoint; the budget ends the turn -------------


async def test_the_in_process_budget_ends_the_turn_naming_the_last_error(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider(
        [[TextDelta("a"), Drop()], [Fail(e.ServerError("500"))], [Fail(e.Overloaded("529"))]]
    )
    policy = RetryPolicy(max_interruptions=2, idle_timeout=5)
    outcome = failed(await run(make_runner(provider, store, clock, sleep, retry=policy)))
    assert outcome.error.code == "retry_budget_exhausted"
    assert "overloaded" in outcome.error.message
    assert outcome.retry_count == 3 and len(sleep.delays) == 2
    saved_now = await stored_checkpoint(store)
    assert saved_now.retry_count == 3 and saved_now.last_error == "overloaded"
    assert saved_now.partial_text == "a"


async def test_resumes_of_crashed_attempts_count_against_the_budget(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(partial_text="Stuck", retry_count=5, last_error=ATTEMPT_LOST))
    provider = ScriptedProvider([])
    outcome = failed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.error.code == "retry_budget_exhausted"
    assert ATTEMPT_LOST in outcome.error.message
    assert provider.calls == 0


async def test_in_process_retries_are_written_to_the_checkpoint(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider([[TextDelta("x"), Drop()], [TextDelta("y"), Stall()]])
    runner = make_runner(provider, store, clock, sleep)
    await crash_after(2, run(runner), provider)
    checkpoint = await stored_checkpoint(store)
    assert checkpoint.retry_count == 1 and checkpoint.last_error == "connection_dropped"
    assert checkpoint.partial_text == "xy"


# -- the deadline ------------------------------------------------------------------------


async def test_a_deadline_suspends_and_a_later_call_resumes_without_burning_budget(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider(
        [[*text_deltas("Before the deadline. "), Hook(lambda: clock.advance(100)), TextDelta("Z")]]
    )
    outcome = await run(make_runner(provider, store, clock, sleep), deadline=clock() + 50)
    assert isinstance(outcome, TurnSuspended)
    checkpoint = await stored_checkpoint(store)
    assert checkpoint.suspended and checkpoint.retry_count == 0
    assert checkpoint.partial_text.startswith("Before the deadline.")
    assert outcome.checkpoint_version == (await store.get(RUN_ID)).version  # type: ignore[union-attr]

    later = ScriptedProvider([text_turn("After.")])
    resumed = completed(
        await run(make_runner(later, store, clock, sleep, writer_id="w2"), deadline=clock() + 50)
    )
    assert resumed.plan_kind == "R1" and resumed.retry_count == 0
    assert resumed.message.text.startswith("Before the deadline.")
    assert resumed.message.text.endswith("After.")


async def test_a_deadline_already_passed_suspends_without_a_model_call(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider([])
    outcome = await run(make_runner(provider, store, clock, sleep), deadline=clock() - 1)
    assert isinstance(outcome, TurnSuspended) and provider.calls == 0


async def test_a_backoff_that_would_cross_the_deadline_suspends_instead(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider([[TextDelta("a"), Fail(e.Throttled("x", retry_after=30))]])
    outcome = await run(make_runner(provider, store, clock, sleep), deadline=clock() + 10)
    assert isinstance(outcome, TurnSuspended)
    assert outcome.retry_count == 1 and sleep.delays == []


# -- stalls ------------------------------------------------------------------------------


async def test_an_idle_stream_is_abandoned_as_stalled_and_retried(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider([[TextDelta("Slow "), Stall()], text_turn("but done.")])
    runner = make_runner(provider, store, clock, sleep, retry=RetryPolicy(idle_timeout=0.05))
    outcome = completed(await run(runner))
    assert outcome.message.text == "Slow but done."
    assert outcome.retry_count == 1
    assert store.history[-1].last_error == "stream_stalled"


# -- fencing, staleness and checkpoint faults -------------------------------------------


async def test_a_checkpoint_of_a_newer_epoch_means_we_are_a_zombie(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    version = await plant(store, saved(partial_text="theirs", epoch=7))
    provider = ScriptedProvider([])
    record = RunRecord(ours=False)
    runner = make_runner(provider, store, clock, sleep)
    outcome = fenced(await run(runner, epoch=3, confirm_owner=record))
    assert "epoch 7" in outcome.detail and record.asked == 1
    assert provider.calls == 0
    assert (await store.get(RUN_ID)).version == version  # type: ignore[union-attr]


async def test_a_newer_epoch_the_run_record_never_had_is_replaced_not_obeyed(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    # A table restored to an earlier point in time: the checkpoint carries epoch 7 while the
    # run record says 3 is current. The run record decides: the checkpoint is reused as the
    # hint it is, and replaced by our writes.
    await plant(store, saved(partial_text="Saved text ", epoch=7))
    provider = ScriptedProvider([text_turn("and the rest.")])
    runner = make_runner(provider, store, clock, sleep)
    outcome = completed(await run(runner, epoch=3, confirm_owner=RunRecord(ours=True)))
    assert outcome.plan_kind == "R1"
    assert outcome.message.text == "Saved text and the rest."
    assert (await stored_checkpoint(store)).epoch == 3


async def test_a_writer_fenced_mid_stream_stops_and_fails_as_fenced(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    takeover = saved(epoch=2, writer="new-owner", partial_text="new owner")
    # Another worker with a newer lease writes the object under our feet.
    provider = ScriptedProvider(
        [
            [
                TextDelta("a"),
                Hook(lambda: store.put_raw(RUN_ID, encode_checkpoint(takeover))),
                *text_deltas("b" * 50),
                *finish(),
            ]
        ]
    )
    record = RunRecord(ours=False)
    fenced(await run(make_runner(provider, store, clock, sleep), epoch=1, confirm_owner=record))
    assert record.asked >= 1
    assert (await stored_checkpoint(store)).writer == "new-owner"


async def test_a_lost_condition_the_run_record_denies_is_repaired_in_place(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    # A planted object from an impossible epoch lands mid-stream: the run record says the
    # lease is still ours, so the writer replaces it and the turn goes on uninterrupted.
    planted = saved(epoch=9, writer="foreign", partial_text="planted")
    provider = ScriptedProvider(
        [
            [
                TextDelta("a"),
                Hook(lambda: store.put_raw(RUN_ID, encode_checkpoint(planted))),
                *text_deltas("b" * 50),
                *finish(),
            ]
        ]
    )
    runner = make_runner(provider, store, clock, sleep)
    outcome = completed(await run(runner, epoch=1, confirm_owner=RunRecord(ours=True)))
    assert outcome.message.text == "a" + "b" * 50
    assert outcome.checkpoint_stats.repaired >= 1 and outcome.checkpoint_stats.fenced == 0
    mine = await stored_checkpoint(store)
    assert (mine.writer, mine.epoch) == ("worker-a", 1)


async def test_a_checkpoint_deleted_under_its_writer_is_created_again(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    # An operator's clean-up removed the live object: If-Match now meets a missing key.
    async def remove() -> None:
        await store.delete(RUN_ID)

    provider = ScriptedProvider(
        [
            [
                TextDelta("a"),
                Hook(lambda: asyncio.ensure_future(remove())),
                *text_deltas("b" * 50),
                *finish(),
            ]
        ]
    )
    runner = make_runner(provider, store, clock, sleep)
    outcome = completed(await run(runner, epoch=1, confirm_owner=RunRecord(ours=True)))
    assert outcome.message.text == "a" + "b" * 50
    assert (await stored_checkpoint(store)).partial_text == "a" + "b" * 50


async def test_a_stale_checkpoint_of_another_turn_is_never_replayed(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(turn=2, partial_text="turn two text"))
    provider = ScriptedProvider([text_turn("Turn three.")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep), turn=3))
    assert outcome.plan_kind is None
    assert provider.requests == [REQUEST]
    assert outcome.message.text == "Turn three."
    checkpoint = await stored_checkpoint(store)
    assert checkpoint.turn == 3  # replaced conditionally


async def test_a_committed_turn_s_checkpoint_is_deleted_at_its_version_before_the_turn(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    # Left by a crash between the commit of turn 2 and its delete: stale, deleted by the
    # runner of turn 3 at the version it judged (never blindly), then the turn starts fresh.
    stale = await plant(store, saved(turn=2, partial_text="turn two text"))
    provider = ScriptedProvider([text_turn("Turn three.")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep), turn=3))
    assert store.deleted_versions == [stale]
    assert (outcome.plan_kind, provider.requests) == (None, [REQUEST])
    assert (await stored_checkpoint(store)).turn == 3


async def test_a_corrupt_checkpoint_is_discarded_and_the_turn_runs_fresh(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    judged = store.put_raw(RUN_ID, b"{not json")
    provider = ScriptedProvider([text_turn("Fine.")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.checkpoint_stats.load_failures == 1
    assert outcome.checkpoint_stats.puts >= 1
    assert (await stored_checkpoint(store)).partial_text == "Fine."
    # The delete named the version judged corrupt: a body rewritten meanwhile would be kept.
    assert store.deleted_versions == [judged]


class DownStore(CountingStore):
    async def get(self, run_id: str) -> StoredCheckpoint | None:
        from awaken_s3.errors import StreamCheckpointError

        raise StreamCheckpointError("endpoint unreachable")

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        from awaken_s3.errors import StreamCheckpointError

        raise StreamCheckpointError("endpoint unreachable")


async def test_a_checkpoint_outage_never_stops_the_turn(
    clock: FakeClock, sleep: RecordingSleep, caplog: pytest.LogCaptureFixture
) -> None:
    store = DownStore()
    provider = ScriptedProvider([[*text_deltas("Streaming on. "), Drop()], text_turn("Done.")])
    with caplog.at_level(logging.WARNING):
        outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.message.text == "Streaming on. Done."
    assert outcome.checkpoint_stats.load_failures == 1
    assert outcome.checkpoint_stats.failures >= 1 and outcome.checkpoint_stats.puts == 0
    assert any(r.name == "awaken_s3.checkpoint" for r in caplog.records)


async def test_an_existing_checkpoint_passed_in_is_not_loaded_again(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    version = await plant(store, saved(partial_text="Known"))
    existing = await store.get(RUN_ID)
    gets = store.gets
    provider = ScriptedProvider([text_turn(" text.")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep), existing=existing))
    assert store.gets == gets
    assert outcome.message.text == "Known text." and outcome.checkpoint_version != version
    none_outcome = completed(
        await run(
            make_runner(ScriptedProvider([text_turn("x")]), CountingStore(), clock, sleep),
            existing=None,
        )
    )
    assert none_outcome.plan_kind is None


async def test_usage_of_every_attempt_is_summed(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider(
        [
            [UsageEvent(100, 5), TextDelta("a"), Drop()],
            [*text_deltas("b"), *finish(input_tokens=110, output_tokens=7)],
        ]
    )
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (210, 12)


async def test_a_stream_ending_without_a_stop_reason_is_a_dropped_connection(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider([[TextDelta("cut")], text_turn(" off")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.message.text == "cut off"
    assert store.history[-1].last_error == "connection_dropped"


async def test_no_checkpointing_policy_reads_and_writes_nothing(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(partial_text="ignored"))
    provider = ScriptedProvider([text_turn("Plain.")])
    runner = make_runner(provider, store, clock, sleep, checkpoint=CheckpointPolicy(enabled=False))
    outcome = completed(await run(runner))
    assert outcome.message.text == "Plain." and store.gets == 0 and len(store.history) == 1


# -- the stream never waits for the checkpoint store -----------------------------------


async def test_the_stream_is_consumed_while_a_put_hangs(
    clock: FakeClock, sleep: RecordingSleep
) -> None:
    from .test_coalescer import GatedStore

    store = GatedStore()
    events = [*text_deltas("x" * 400, chunk=1), *finish()]
    provider = ScriptedProvider([events])
    task = asyncio.create_task(run(make_runner(provider, store, clock, sleep)))
    # Every event is folded while the first put is still stuck in the store.
    await eventually(lambda: provider.events_sent == len(events))
    assert store.in_flight == 1 and store.history == []
    assert not task.done()  # completion waits for the put in flight, for its version
    store.gate.set()
    outcome = completed(await task)
    assert outcome.message.text == "x" * 400
    assert store.max_in_flight == 1
    assert outcome.checkpoint_version == (await store.get(RUN_ID)).version  # type: ignore[union-attr]


async def test_a_stale_checkpoint_deleted_meanwhile_does_not_fence_the_runner(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await plant(store, saved(turn=0, partial_text="old turn"))
    stale = await store.get(RUN_ID)
    await store.delete(RUN_ID)  # the run loop cleaned it up after handing it to us
    provider = ScriptedProvider([text_turn("New turn.")])
    outcome = completed(
        await run(make_runner(provider, store, clock, sleep), turn=1, existing=stale)
    )
    assert outcome.message.text == "New turn."
    assert (await stored_checkpoint(store)).turn == 1


class ClosingProvider:
    """A provider whose stream records being closed, as an HTTP stream must be."""

    name = "closing"

    def __init__(self, tail: list[Any]) -> None:
        self.tail = tail
        self.closed = 0

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=True)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        try:
            yield TextDelta("partial ")
            for step in self.tail:
                if isinstance(step, Stall):
                    await asyncio.Event().wait()
                elif isinstance(step, Hook):
                    step.action()
                else:
                    yield step
        finally:
            self.closed += 1


async def test_a_stalled_stream_is_closed_and_counts_as_an_interruption(
    store: CountingStore, clock: FakeClock
) -> None:
    provider = ClosingProvider([Stall()])
    policy = RetryPolicy(max_interruptions=0, idle_timeout=0.02)
    runner = TurnRunner(provider, store, writer_id="w", retry_policy=policy, clock=clock)
    outcome = failed(await run(runner))
    assert outcome.error.code == "retry_budget_exhausted"
    assert "stream_stalled" in outcome.error.message
    assert provider.closed == 1
    assert runner.last_stats == outcome.checkpoint_stats


async def test_a_stream_cut_by_the_deadline_is_closed(
    store: CountingStore, clock: FakeClock
) -> None:
    provider = ClosingProvider([Hook(lambda: clock.advance(100)), TextDelta("too late")])
    runner = TurnRunner(provider, store, writer_id="w", clock=clock)
    outcome = await run(runner, deadline=clock() + 5)
    assert isinstance(outcome, TurnSuspended)
    assert provider.closed == 1
    assert (await stored_checkpoint(store)).partial_text == "partial too late"


async def test_a_newer_build_s_checkpoint_is_left_alone_and_the_turn_runs_without_one(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    import json

    payload = json.loads(encode_checkpoint(saved(partial_text="written by v2")))
    payload["schema_version"] = 99
    version = store.put_raw(RUN_ID, json.dumps(payload).encode())
    provider = ScriptedProvider([text_turn("Fresh answer.")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.message.text == "Fresh answer."
    assert outcome.checkpoint_stats.newer_schema == 1
    assert (outcome.checkpoint_stats.puts, outcome.checkpoint_version) == (0, None)
    # Neither replaced nor deleted: a newer worker may still resume from it.
    assert store.deletes == 0 and store.history == []
    assert store._objects[RUN_ID][1] == version


async def test_checkpoints_say_which_plan_the_turn_was_last_resumed_with(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider([[*text_deltas("Half of it "), Drop()], text_turn("and the rest.")])
    outcome = completed(await run(make_runner(provider, store, clock, sleep)))
    assert outcome.message.text == "Half of it and the rest."
    plans = [c.resumed_with for c in store.history]
    # Fresh until the drop; every checkpoint after the in-process R1 resume says so.
    assert plans[0] is None and plans[-1] == "R1"
    assert plans == sorted(plans, key=lambda p: p is not None)
