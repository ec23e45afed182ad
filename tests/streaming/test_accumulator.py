"""StreamAccumulator: text as received, tool calls by index, usage, snapshots."""

from __future__ import annotations

from awaken_s3.messages import TextBlock, ToolUseBlock
from awaken_s3.models import decode_checkpoint, encode_checkpoint
from awaken_s3.streaming.accumulator import StreamAccumulator
from awaken_s3.streaming.continuation import SEAM_WINDOW
from awaken_s3.streaming.events import (
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.scripted import interleave, tool_call

from .conftest import RUN_ID, THREAD_ID


def snapshot(acc: StreamAccumulator) -> object:
    return acc.snapshot(
        run_id=RUN_ID,
        thread_id=THREAD_ID,
        model="m",
        turn=3,
        retry_count=2,
        epoch=4,
        writer="w",
        suspended=True,
        last_error="throttled",
    )


def test_characters_split_across_deltas_survive_a_checkpoint_round_trip() -> None:
    # A combining accent, a ZWJ family emoji and CJK, each split at awkward places.
    pieces = ["Cafe", "\u0301 ", "\U0001f468", "\u200d\U0001f469", "\u200d\U0001f467 ", "東", "京"]
    acc = StreamAccumulator()
    for piece in pieces:
        acc.apply(TextDelta(piece))
    expected = "".join(pieces)
    assert acc.text == expected
    checkpoint = acc.snapshot(
        run_id=RUN_ID, thread_id=THREAD_ID, model="m", turn=0, retry_count=0, epoch=0, writer="w"
    )
    restored = decode_checkpoint(encode_checkpoint(checkpoint), run_id=RUN_ID)
    assert restored.partial_text == expected


def test_parallel_tool_calls_are_kept_apart_by_index() -> None:
    events = interleave(
        tool_call(0, "weather", {"city": "Oslo"}, chunk=3),
        tool_call(1, "clock", {"tz": "UTC"}, chunk=2, close=False),
        tool_call(2, "noop", "", close=True),
    )
    acc = StreamAccumulator()
    boundaries = [acc.apply(event) for event in [TextDelta("Checking."), *events]]
    assert boundaries.count(True) == 3 + 2  # three starts, two ends
    calls = acc.tool_calls
    assert [(c.index, c.name, c.closed) for c in calls] == [
        (0, "weather", True),
        (1, "clock", False),
        (2, "noop", True),
    ]
    assert calls[0].arguments == '{"city": "Oslo"}'
    assert calls[1].arguments == '{"tz": "UTC"}'
    message, dropped = acc.message()
    assert message.content == (
        TextBlock(text="Checking."),
        ToolUseBlock(id="call_0", name="weather", input={"city": "Oslo"}),
        ToolUseBlock(id="call_1", name="clock", input={"tz": "UTC"}),
        ToolUseBlock(id="call_2", name="noop", input={}),
    )
    assert dropped == ()


def test_incomplete_calls_never_reach_the_message() -> None:
    acc = StreamAccumulator()
    for event in [*tool_call(0, "a", '{"x": 1}'), *tool_call(1, "b", '{"y": ', close=False)]:
        acc.apply(event)
    message, dropped = acc.message()
    assert [b.id for b in message.tool_uses] == ["call_0"]
    assert [d.id for d in dropped] == ["call_1"]


def test_arguments_after_the_end_are_ignored() -> None:
    acc = StreamAccumulator()
    events: list[StreamEvent] = [ToolCallStart(0, "c", "n"), ToolCallDelta(0, "{}"), ToolCallEnd(0)]
    for event in events:
        acc.apply(event)
    acc.apply(ToolCallDelta(0, "garbage"))
    assert acc.tool_calls[0].arguments == "{}"


def test_usage_keeps_running_totals_per_stream_and_sums_attempts() -> None:
    acc = StreamAccumulator()
    acc.apply(UsageEvent(input_tokens=100, output_tokens=1))  # like message_start
    acc.apply(UsageEvent(input_tokens=0, output_tokens=40))  # like message_delta
    assert (acc.usage.input_tokens, acc.usage.output_tokens) == (100, 40)
    acc.restart("partial")
    acc.apply(UsageEvent(input_tokens=120, output_tokens=15))
    assert (acc.usage.input_tokens, acc.usage.output_tokens) == (220, 55)


def test_snapshot_carries_the_fencing_and_retry_fields() -> None:
    acc = StreamAccumulator()
    for event in [TextDelta("Hi "), TextDelta("there"), *tool_call(0, "t", "{")]:
        acc.apply(event)
    acc.apply(StopEvent("tool_use"))
    cp = snapshot(acc)
    assert cp.partial_text == "Hi there"  # type: ignore[attr-defined]
    assert cp.tool_calls[0].arguments == "{"  # type: ignore[attr-defined]
    assert (cp.turn, cp.retry_count, cp.epoch, cp.writer) == (3, 2, 4, "w")  # type: ignore[attr-defined]
    assert cp.suspended and cp.last_error == "throttled"  # type: ignore[attr-defined]
    assert acc.stop_reason == "tool_use"


def test_a_restart_keeps_the_prefix_and_drops_calls() -> None:
    acc = StreamAccumulator()
    for event in [TextDelta("Saved"), *tool_call(0, "t", "{", close=False)]:
        acc.apply(event)
    acc.restart("Saved")
    assert acc.text == "Saved" and acc.tool_calls == ()
    acc.apply(TextDelta(" more"))
    assert acc.text == "Saved more"


def test_an_echo_at_the_seam_is_trimmed_and_then_settled() -> None:
    acc = StreamAccumulator("It rains. The sky is grey.", trim_echo=True)
    acc.apply(TextDelta("The sky is "))
    acc.apply(TextDelta("grey. Wind"))
    assert acc.text == "It rains. The sky is grey. Wind"
    acc.apply(TextDelta("x" * SEAM_WINDOW))  # settles the seam for good
    assert acc.text == "It rains. The sky is grey. Wind" + "x" * SEAM_WINDOW
