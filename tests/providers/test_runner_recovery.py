"""Each interruption, on each real adapter and wire format, ends in the right R1-R4 plan.

The turn runner drives the real adapter against the local wire server. Two
shapes of recovery are exercised:

* crash-resume: a first runner ("process A") is given no retry budget, so the
  interruption ends its turn with the partial flushed to the checkpoint store; a
  second runner ("process B", a newer lease epoch) loads it and reports the plan
  it used (``plan_kind``);
* in-process: one runner retries after the interruption; the plan shows in the
  next request it sends (a prefix for R1/R3, the original request for R4, no
  request at all for R2).
"""

from __future__ import annotations

import json

import pytest

from awaken_s3.messages import Message
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.continuation import CONTINUE_INSTRUCTION
from awaken_s3.streaming.events import ToolCallDelta
from awaken_s3.streaming.outcome import TurnCompleted, TurnFailed, TurnOutcome, TurnSuspended
from awaken_s3.streaming.provider import ModelRequest, Provider
from awaken_s3.streaming.recovery import plan_recovery
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.streaming.turn_request import TurnRequest
from tests.fixtures.clock import FakeClock
from tests.providers.helpers import WEATHER, DeadlineBefore
from tests.providers.wire.dialects import API_KEY, DIALECTS, PREFILL_REJECTION, Dialect
from tests.providers.wire.dialects import Message as Sent
from tests.providers.wire.server import DROP, STALL, Part, WireServer

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)]

RUN, THREAD = "run-1", "thread-1"
QUESTION = "What is the weather in Paris and Oslo?"


def request(d: Dialect) -> ModelRequest:
    return ModelRequest(model=d.model, messages=(Message.user(QUESTION),), tools=(WEATHER,))


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def run(
    provider: Provider,
    store: InMemoryStreamCheckpointStore,
    d: Dialect,
    *,
    epoch: int,
    budget: int = 5,
    sleeps: Sleeps | None = None,
) -> TurnOutcome:
    runner = TurnRunner(
        provider,
        store,
        writer_id=f"worker-{epoch}",
        retry_policy=RetryPolicy(max_interruptions=budget),
        sleep=sleeps or Sleeps(),
    )
    return await runner.run_turn(
        TurnRequest(run_id=RUN, thread_id=THREAD, turn=0, epoch=epoch, request=request(d))
    )


def interruption(d: Dialect, kind: str) -> Part:
    return {"drop": DROP, "stall": STALL, "error": d.overloaded_in_stream()}[kind]


@pytest.mark.parametrize("kind", ["drop", "stall", "error"])
async def test_text_then_interruption_resumes_with_r1_in_another_process(
    wire: WireServer, d: Dialect, kind: str
) -> None:
    store = InMemoryStreamCheckpointStore()
    provider = d.provider(wire, idle_timeout=0.3)
    wire.push(
        d.stream(d.start(), d.text(["The weather in Paris ", "is mild"]), [interruption(d, kind)])
    )
    first = await run(provider, store, d, epoch=1, budget=0)
    assert isinstance(first, TurnFailed)
    assert first.error.code == "retry_budget_exhausted"
    stored = await store.get(RUN)
    assert stored is not None
    plan = plan_recovery(stored.checkpoint)
    assert plan.kind == "R1"
    assert plan.prefix_text == "The weather in Paris is mild"

    wire.push(d.text_turn([" and sunny."]))
    second = await run(provider, store, d, epoch=2)
    assert isinstance(second, TurnCompleted)
    assert second.plan_kind == "R1"
    # Rule 1: the whole turn, prefix + continuation.
    assert second.message.text == "The weather in Paris is mild and sunny."
    # No prefill on these models: the prefix goes out as an assistant message
    # followed by a request to continue (rule 8).
    assert d.messages(wire.received[1])[-2:] == [
        Sent("assistant", "The weather in Paris is mild"),
        Sent("user", CONTINUE_INSTRUCTION),
    ]


async def test_in_process_r1_with_prefill_sends_a_trailing_assistant_message(
    wire: WireServer, d: Dialect
) -> None:
    store = InMemoryStreamCheckpointStore()
    provider = d.provider(wire, prefill=True)
    wire.push(
        d.stream(d.start(), d.text(["Paris is ", "mild"]), [DROP]),
        d.text_turn([" today."]),
    )
    outcome = await run(provider, store, d, epoch=1)
    assert isinstance(outcome, TurnCompleted)
    assert outcome.message.text == "Paris is mild today."
    assert d.messages(wire.received[1])[-1] == Sent("assistant", "Paris is mild")


async def test_complete_tool_calls_then_drop_is_r2_without_a_model_call(
    wire: WireServer, d: Dialect
) -> None:
    store = InMemoryStreamCheckpointStore()
    calls = [
        ("call_A", "get_weather", ['{"city": ', '"Paris"}'], True),
        ("call_B", "get_weather", ['{"city": "Os', 'lo"}'], True),
    ]
    wire.push(
        d.stream(d.start(), d.text(["Checking both."]), d.tools(calls, first_block=1), [DROP])
    )
    outcome = await run(d.provider(wire), store, d, epoch=1)
    assert isinstance(outcome, TurnCompleted)
    assert outcome.stop_reason == "tool_use"
    assert outcome.message.text == "Checking both."
    assert [(t.id, t.input) for t in outcome.message.tool_uses] == [
        ("call_A", {"city": "Paris"}),
        ("call_B", {"city": "Oslo"}),
    ]
    assert len(wire.received) == 1
    stored = await store.get(RUN)
    assert stored is not None and plan_recovery(stored.checkpoint).kind == "R2"
    # A later process that finds this checkpoint synthesizes the same turn.
    again = await run(d.provider(wire), store, d, epoch=2)
    assert isinstance(again, TurnCompleted) and again.plan_kind == "R2"
    assert again.message == outcome.message
    assert len(wire.received) == 1


async def test_text_and_an_unfinished_tool_call_is_r3_in_process(
    wire: WireServer, d: Dialect
) -> None:
    store = InMemoryStreamCheckpointStore()
    calls = [("call_A", "get_weather", ['{"city": "Pa'], False)]
    wire.push(
        d.stream(d.start(), d.text(["Let me check."]), d.tools(calls, first_block=1), [DROP]),
        d.text_turn([" It is mild."]),
    )
    outcome = await run(d.provider(wire), store, d, epoch=1)
    assert isinstance(outcome, TurnCompleted)
    assert outcome.message.text == "Let me check. It is mild."
    assert outcome.message.tool_uses == ()
    assert [c.id for c in outcome.dropped_tool_calls] == ["call_A"]
    # The broken call is never sent back to the model; the text is the prefix.
    assert "call_A" not in wire.received[1].body.decode()
    assert d.messages(wire.received[1])[-2] == Sent("assistant", "Let me check.")


async def test_deadline_mid_tool_call_suspends_then_resumes_with_r3(
    wire: WireServer, d: Dialect
) -> None:
    store = InMemoryStreamCheckpointStore()
    calls = [("call_A", "get_weather", ['{"city": "Pa'], False)]
    wire.push(
        d.stream(d.start(), d.text(["Let me check."]), d.tools(calls, first_block=1), [STALL])
    )
    provider = d.provider(wire)
    # Process A reaches its (Lambda) deadline while the call is still streaming: right after
    # the call's first argument fragment.
    clock = FakeClock()
    cut = DeadlineBefore(provider, clock, lambda event: isinstance(event, ToolCallDelta))
    runner = TurnRunner(cut, store, writer_id="worker-1", clock=clock)
    first = await runner.run_turn(
        TurnRequest(
            run_id=RUN,
            thread_id=THREAD,
            turn=0,
            epoch=1,
            request=request(d),
            deadline=clock() + 60.0,
        )
    )
    assert isinstance(first, TurnSuspended)
    stored = await store.get(RUN)
    assert stored is not None
    assert [c.arguments for c in stored.checkpoint.tool_calls] == ['{"city": "Pa']
    assert plan_recovery(stored.checkpoint).kind == "R3"

    wire.push(d.text_turn([" It is mild."]))
    second = await run(provider, store, d, epoch=2)
    assert isinstance(second, TurnCompleted)
    assert second.plan_kind == "R3"
    assert second.message.text == "Let me check. It is mild."
    assert [c.id for c in second.dropped_tool_calls] == ["call_A"]
    assert "call_A" not in wire.received[-1].body.decode()


async def test_error_before_any_content_is_r4_restart(wire: WireServer, d: Dialect) -> None:
    store = InMemoryStreamCheckpointStore()
    sleeps = Sleeps()
    wire.push(d.stream(d.start(), [d.overloaded_in_stream()]), d.text_turn(["Mild."]))
    outcome = await run(d.provider(wire), store, d, epoch=1, sleeps=sleeps)
    assert isinstance(outcome, TurnCompleted)
    assert outcome.message.text == "Mild."
    assert outcome.retry_count == 1
    # R4: the original request again, no prefix.
    assert wire.received[1].json() == wire.received[0].json()
    assert len(sleeps.delays) == 1  # backoff, no hint from the provider


@pytest.mark.parametrize(("retry_after", "expected"), [("7", 7.0), ("HTTP-DATE", 60.0)])
async def test_429_before_the_stream_honours_the_capped_hint_then_r4(
    wire: WireServer, d: Dialect, retry_after: str, expected: float
) -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    if retry_after == "HTTP-DATE":
        retry_after = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    store = InMemoryStreamCheckpointStore()
    sleeps = Sleeps()
    wire.push(d.throttled(retry_after), d.text_turn(["Mild."]))
    outcome = await run(d.provider(wire), store, d, epoch=1, sleeps=sleeps)
    assert isinstance(outcome, TurnCompleted)
    assert outcome.message.text == "Mild."
    assert sleeps.delays == [expected]
    assert wire.received[1].json() == wire.received[0].json()


async def test_permanent_400_fails_the_turn_without_a_retry(wire: WireServer, d: Dialect) -> None:
    store = InMemoryStreamCheckpointStore()
    sleeps = Sleeps()
    wire.push(d.bad_request())
    outcome = await run(d.provider(wire), store, d, epoch=1, sleeps=sleeps)
    assert isinstance(outcome, TurnFailed)
    assert outcome.error.code == "invalid_request"
    assert not outcome.error.retryable
    assert len(wire.received) == 1
    assert sleeps.delays == []


async def test_rejected_prefill_falls_back_to_a_continue_message(
    wire: WireServer, d: Dialect
) -> None:
    store = InMemoryStreamCheckpointStore()
    # The instance claims prefill support the server then refuses.
    provider = d.provider(wire, prefill=True)
    wire.push(
        d.stream(d.start(), d.text(["Paris is ", "mild"]), [DROP]),
        d.bad_request(PREFILL_REJECTION),
        d.text_turn([" today."]),
    )
    outcome = await run(provider, store, d, epoch=1)
    assert isinstance(outcome, TurnCompleted)
    assert outcome.message.text == "Paris is mild today."
    assert d.messages(wire.received[1])[-1] == Sent("assistant", "Paris is mild")
    assert d.messages(wire.received[2])[-2:] == [
        Sent("assistant", "Paris is mild"),
        Sent("user", CONTINUE_INSTRUCTION),
    ]
    # The API key never lands in a checkpoint.
    stored = await store.get(RUN)
    assert stored is not None
    assert API_KEY not in json.dumps(stored.checkpoint.model_dump(mode="json"))
