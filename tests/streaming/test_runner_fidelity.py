"""The turn runner with reasoning blocks, lost tool calls and refusals."""

from __future__ import annotations

from awaken_s3.messages import Message, TextBlock, ThinkingBlock
from awaken_s3.models import PartialToolCall
from awaken_s3.streaming.continuation import CONTINUE_INSTRUCTION
from awaken_s3.streaming.events import (
    ReasoningDelta,
    ReasoningEnd,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from awaken_s3.streaming.outcome import TurnCompleted, TurnFailed
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.scripted import Drop, ScriptedProvider, text_turn
from tests.fixtures.clock import FakeClock

from .conftest import CountingStore, RecordingSleep, make_runner, run, saved

A = ThinkingBlock(thinking="Check Oslo.", signature="sig-a")


def thinking_a() -> list[StreamEvent]:
    return [
        ReasoningDelta(0),
        ReasoningDelta(0, text="Check Oslo."),
        ReasoningDelta(0, signature="sig-a"),
        ReasoningEnd(0),
    ]


def broken_call(index: int, call_id: str) -> list[StreamEvent]:
    return [
        ToolCallStart(index, call_id, "weather"),
        ToolCallDelta(index, '{"city": "Os'),
        ToolCallEnd(index),
    ]


async def test_a_tool_use_stop_with_only_broken_calls_is_retried_not_answered(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider(
        [
            [TextDelta("Let me check."), *broken_call(0, "t1"), StopEvent("tool_use")],
            [
                TextDelta(" Checking now."),
                ToolCallStart(0, "t2", "weather"),
                ToolCallDelta(0, '{"city": "Oslo"}'),
                ToolCallEnd(0),
                StopEvent("tool_use"),
            ],
        ]
    )
    outcome = await run(make_runner(provider, store, clock, sleep))
    assert isinstance(outcome, TurnCompleted)
    assert outcome.message.text == "Let me check. Checking now."
    assert [c.id for c in outcome.message.tool_uses] == ["t2"]
    # The loss is reported, counted as an interruption, and the broken call never resent.
    assert [(d.id, d.reason) for d in outcome.dropped_tool_calls] == [
        ("t1", "arguments are not valid JSON")
    ]
    assert outcome.retry_count == 1
    assert list(provider.requests[1].messages)[-1] == Message.assistant("Let me check.")


async def test_lost_tool_calls_past_the_budget_fail_the_turn_and_name_the_loss(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider([[*broken_call(0, "t1"), StopEvent("tool_use")]])
    runner = make_runner(provider, store, clock, sleep, retry=RetryPolicy(max_interruptions=0))
    outcome = await run(runner)
    assert isinstance(outcome, TurnFailed)
    assert outcome.error.code == "retry_budget_exhausted"
    assert "tool_calls_lost" in outcome.error.message
    assert [d.id for d in outcome.dropped_tool_calls] == ["t1"]


async def test_a_tool_use_stop_without_any_call_restarts_the_request(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    provider = ScriptedProvider([[StopEvent("tool_use")], text_turn("Oslo is cold.")])
    outcome = await run(make_runner(provider, store, clock, sleep))
    assert isinstance(outcome, TurnCompleted) and outcome.message.text == "Oslo is cold."
    assert provider.requests[1] == provider.requests[0]


async def test_a_prefix_carrying_reasoning_goes_out_with_a_continue_message(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    # The provider claims prefill, but a prefix with thinking would be refused as one.
    provider = ScriptedProvider(
        [
            [*thinking_a(), TextDelta("Oslo is "), Drop()],
            [ReasoningDelta(0, "More.", "sig-b"), ReasoningEnd(0), *text_turn("cold.")],
        ],
        prefill=True,
    )
    outcome = await run(make_runner(provider, store, clock, sleep))
    assert isinstance(outcome, TurnCompleted)
    sent = list(provider.requests[1].messages)
    assert sent[-2:] == [
        Message(role="assistant", content=(A, TextBlock(text="Oslo is"))),
        Message.user(CONTINUE_INSTRUCTION),
    ]
    assert outcome.message.content == (
        A,
        ThinkingBlock(thinking="More.", signature="sig-b"),
        TextBlock(text="Oslo is cold."),
    )


async def test_a_resume_carries_the_checkpoint_reasoning_and_r2_keeps_it(
    store: CountingStore, clock: FakeClock, sleep: RecordingSleep
) -> None:
    await store.put(
        saved(
            partial_text="Checking.",
            reusable_blocks=(A,),
            tool_calls=(
                PartialToolCall(index=0, id="t1", name="weather", arguments="{}", closed=True),
            ),
        ),
        expected_version=None,
    )
    provider = ScriptedProvider([])
    outcome = await run(make_runner(provider, store, clock, sleep), epoch=2)
    assert isinstance(outcome, TurnCompleted) and outcome.plan_kind == "R2"
    assert outcome.message.content[:2] == (A, TextBlock(text="Checking."))
    assert provider.calls == 0
