"""Reasoning and server-tool blocks: what a turn commits, what a checkpoint keeps, how a
cut in or after them plans, and what a continuation carries."""

from __future__ import annotations

import json

import pytest

from awaken_s3.messages import (
    KeptBlock,
    Message,
    ProviderBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from awaken_s3.models import StreamCheckpoint, decode_checkpoint, encode_checkpoint
from awaken_s3.streaming.accumulator import StreamAccumulator
from awaken_s3.streaming.continuation import CONTINUE_INSTRUCTION, build_continuation_request
from awaken_s3.streaming.events import (
    ProviderBlockDone,
    ReasoningDelta,
    ReasoningEnd,
    RedactedReasoning,
    RefusalDelta,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.reasoning import carries_reasoning, reusable_blocks
from awaken_s3.streaming.recovery import plan_recovery, synthesized_turn
from awaken_s3.streaming.refusal import REFUSAL_NOTICE

from .conftest import REQUEST, RUN_ID, THREAD_ID

SIGNED = ThinkingBlock(thinking="Paris first.", signature="sig-1")
UNSIGNED = ThinkingBlock(thinking="Paris first.")
REDACTED = RedactedThinkingBlock(data="EmwKAhgB")
CALL = ProviderBlock(provider="anthropic", block={"type": "server_tool_use", "id": "srv_1"})
RESULT = ProviderBlock(
    provider="anthropic", block={"type": "web_search_tool_result", "tool_use_id": "srv_1"}
)
OTHER_RESULT = ProviderBlock(
    provider="anthropic", block={"type": "web_search_tool_result", "tool_use_id": "srv_9"}
)
UPLOAD = ProviderBlock(provider="anthropic", block={"type": "container_upload", "file_id": "f"})


@pytest.mark.parametrize(
    ("blocks", "reusable"),
    [
        ((SIGNED,), (SIGNED,)),
        ((UNSIGNED,), ()),
        ((RedactedThinkingBlock(data=""),), ()),
        ((REDACTED, SIGNED), (REDACTED, SIGNED)),
        # A server call is reusable only with its result, and a result only with its call.
        ((CALL, RESULT), (CALL, RESULT)),
        ((CALL,), ()),
        ((OTHER_RESULT,), ()),
        ((SIGNED, CALL, RESULT, UNSIGNED), (SIGNED, CALL, RESULT)),
        ((UPLOAD,), (UPLOAD,)),
    ],
)
def test_reusable_blocks(blocks: tuple[KeptBlock, ...], reusable: tuple[KeptBlock, ...]) -> None:
    assert reusable_blocks(blocks) == reusable


def test_carries_reasoning() -> None:
    assert carries_reasoning((CALL, RESULT, REDACTED))
    assert carries_reasoning((UNSIGNED,))
    assert not carries_reasoning((CALL, RESULT))


A = ThinkingBlock(thinking="a", signature="sig:a")
PARIS = ThinkingBlock(thinking="Paris first.", signature="sig:Paris first.")


def thinking(
    index: int, text: str, *, signed: bool = True, closed: bool = True
) -> list[StreamEvent]:
    events: list[StreamEvent] = [ReasoningDelta(index), ReasoningDelta(index, text=text)]
    if signed:
        events.append(ReasoningDelta(index, signature=f"sig:{text}"))
    if closed:
        events.append(ReasoningEnd(index))
    return events


def snapshot(acc: StreamAccumulator) -> StreamCheckpoint:
    return acc.snapshot(
        run_id=RUN_ID, thread_id=THREAD_ID, model="m", turn=0, retry_count=0, epoch=1, writer="w"
    )


def fold(events: list[StreamEvent]) -> tuple[StreamAccumulator, list[bool]]:
    acc = StreamAccumulator()
    return acc, [acc.apply(e) for e in events]


def test_a_finished_turn_commits_reasoning_first_then_text_then_calls() -> None:
    acc, boundaries = fold(
        [
            *thinking(0, "Check both."),
            RedactedReasoning(1, "EmwK"),
            RedactedReasoning(1, "AhgB"),
            ReasoningEnd(1),
            TextDelta("Checking."),
            ToolCallStart(0, "t1", "weather"),
            ToolCallDelta(0, '{"city": "Oslo"}'),
            ToolCallEnd(0),
            StopEvent("tool_use"),
        ]
    )
    message, dropped = acc.message()
    assert message.content == (
        ThinkingBlock(thinking="Check both.", signature="sig:Check both."),
        RedactedThinkingBlock(data="EmwKAhgB"),
        TextBlock(text="Checking."),
        ToolUseBlock(id="t1", name="weather", input={"city": "Oslo"}),
    )
    assert dropped == ()
    # A block that became complete is a boundary: the checkpoint is flushed right then.
    assert boundaries[3] and boundaries[6]
    # Thinking deltas are not checkpoint content (they would only be thrown away).
    assert acc.content_chars == len("Checking.") + len('{"city": "Oslo"}')


def test_unsigned_reasoning_is_committed_but_never_checkpointed() -> None:
    acc, _ = fold([*thinking(0, "from a compatible server", signed=False), TextDelta("Hi")])
    assert acc.message()[0].content[0] == ThinkingBlock(thinking="from a compatible server")
    assert snapshot(acc).reusable_blocks == ()


def test_deltas_after_a_block_closed_are_ignored() -> None:
    acc, _ = fold([*thinking(0, "done"), ReasoningDelta(0, text=" more", signature="x")])
    assert acc.reusable_blocks == (ThinkingBlock(thinking="done", signature="sig:done"),)


# -- cuts: what the checkpoint keeps and how it plans ----------------------------


@pytest.mark.parametrize(
    ("events", "plan", "blocks", "prefix"),
    [
        # Inside a thinking block: the signature has not arrived, nothing is reusable.
        (thinking(0, "Paris fi", signed=False, closed=False), "R4", (), ""),
        # The signature arrived but the block was not closed yet: still not reusable.
        (thinking(0, "Paris first.", closed=False), "R4", (), ""),
        # Right after a complete block, before any text: thinking alone is no prefix.
        (thinking(0, "Paris first."), "R4", (), ""),
        # In text after a complete block: R1, the block carried in front of the prefix.
        ([*thinking(0, "Paris first."), TextDelta("Paris is")], "R1", (PARIS,), "Paris is"),
        # Inside a redacted block (its data came, its end did not).
        ([RedactedReasoning(0, "Emw")], "R4", (), ""),
        (
            [RedactedReasoning(0, "Emw"), ReasoningEnd(0), TextDelta("Hi")],
            "R1",
            (RedactedThinkingBlock(data="Emw"),),
            "Hi",
        ),
        # Inside a second thinking block (interleaved): the first still counts.
        (
            [*thinking(0, "a"), TextDelta("Hi"), *thinking(1, "b", signed=False, closed=False)],
            "R1",
            (A,),
            "Hi",
        ),
        # A server call whose result never came is not carried; the text still is.
        (
            [TextDelta("Let me search."), ProviderBlockDone("anthropic", dict(CALL.block))],
            "R1",
            (),
            "Let me search.",
        ),
        # Complete reasoning, then a complete tool call: R2 synthesises the turn with it.
        (
            [
                *thinking(0, "a"),
                ToolCallStart(0, "t1", "weather"),
                ToolCallDelta(0, "{}"),
                ToolCallEnd(0),
            ],
            "R2",
            (A,),
            "",
        ),
    ],
)
def test_a_cut_plans_by_text_and_calls_and_carries_only_complete_blocks(
    events: list[StreamEvent], plan: str, blocks: tuple[KeptBlock, ...], prefix: str
) -> None:
    acc, _ = fold(events)
    restored = decode_checkpoint(encode_checkpoint(snapshot(acc)), run_id=RUN_ID)
    decided = plan_recovery(restored)
    assert (decided.kind, decided.blocks, decided.prefix_text) == (plan, blocks, prefix)


def test_unsigned_reasoning_never_reaches_the_stored_body() -> None:
    acc, _ = fold([*thinking(0, "secret plan", signed=False, closed=False)])
    assert b"secret plan" not in encode_checkpoint(snapshot(acc))


def test_r2_synthesised_turn_keeps_the_reasoning_the_next_request_needs() -> None:
    acc, _ = fold(
        [
            *thinking(0, "a"),
            TextDelta("On it."),
            ToolCallStart(0, "t1", "w"),
            ToolCallDelta(0, "{}"),
        ]
    )
    acc.apply(ToolCallEnd(0))
    turn = synthesized_turn(plan_recovery(snapshot(acc)))
    assert turn.content == (
        A,
        TextBlock(text="On it."),
        ToolUseBlock(id="t1", name="w", input={}),
    )


def test_restart_carries_the_plan_blocks_and_appends_the_new_attempt() -> None:
    acc, _ = fold([*thinking(0, "a"), TextDelta("Paris is"), *thinking(1, "b", closed=False)])
    plan = plan_recovery(snapshot(acc))
    acc.restart(plan.prefix_text, trim_echo=True, blocks=plan.blocks)
    # The new stream numbers its blocks from 0 again.
    for event in [*thinking(0, "c"), TextDelta(" mild."), StopEvent("end_turn")]:
        acc.apply(event)
    assert acc.message()[0].content == (
        A,
        ThinkingBlock(thinking="c", signature="sig:c"),
        TextBlock(text="Paris is mild."),
    )
    # R4 drops everything.
    acc.restart("")
    assert acc.reusable_blocks == () and acc.message()[0].content == ()


def test_checkpoints_without_blocks_keep_the_old_body_and_old_bodies_decode() -> None:
    acc, _ = fold([TextDelta("Hello")])
    body = encode_checkpoint(snapshot(acc))
    assert b"reusable_blocks" not in body
    payload = json.loads(body)
    assert decode_checkpoint(json.dumps(payload).encode(), run_id=RUN_ID).reusable_blocks == ()
    with_blocks = fold([*thinking(0, "a"), TextDelta("Hi")])[0]
    restored = decode_checkpoint(encode_checkpoint(snapshot(with_blocks)), run_id=RUN_ID)
    assert restored.reusable_blocks == (A,)


def test_a_continuation_puts_carried_blocks_before_the_prefix() -> None:
    request = build_continuation_request(
        REQUEST, "Paris is ", prefill=False, blocks=(SIGNED, CALL, RESULT)
    )
    assert list(request.messages[-2:]) == [
        Message(role="assistant", content=(SIGNED, CALL, RESULT, TextBlock(text="Paris is"))),
        Message.user(CONTINUE_INSTRUCTION),
    ]


# -- refusals and usage ------------------------------------------------------------


def test_refusal_text_is_the_committed_answer_and_never_a_prefix() -> None:
    acc, _ = fold([RefusalDelta("I can't "), RefusalDelta("help with that.")])
    assert snapshot(acc).partial_text == ""
    assert plan_recovery(snapshot(acc)).kind == "R4"
    acc.apply(StopEvent("refusal"))
    assert acc.message()[0] == Message.assistant("I can't help with that.")


def test_a_refusal_without_words_gets_a_notice_so_the_message_is_never_empty() -> None:
    acc, _ = fold([TextDelta("Hello.."), StopEvent("refusal")])
    assert acc.message()[0].content == (TextBlock(text="Hello.."), TextBlock(text=REFUSAL_NOTICE))


def test_usage_keeps_cache_reads_and_writes_apart_and_sums_attempts() -> None:
    acc, _ = fold([UsageEvent(10, 1, 100, 5), UsageEvent(10, 7, 100, 5)])
    acc.restart("")
    acc.apply(UsageEvent(3, 2, 40, 0))
    usage = acc.usage
    assert (usage.input_tokens, usage.output_tokens) == (13, 9)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (140, 5)
