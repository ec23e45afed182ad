"""Request mapping and stream translation details (pure, no I/O)."""

from __future__ import annotations

from types import SimpleNamespace as NS

from awaken_s3.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from awaken_s3.providers.anthropic_format import AnthropicStreamTranslator, build_anthropic_request
from awaken_s3.providers.bedrock_format import ConverseStreamTranslator, build_converse_request
from awaken_s3.providers.openai_format import OpenAIStreamTranslator, build_openai_messages
from awaken_s3.providers.stream_state import ToolCallIndexer, rstrip_prefill
from awaken_s3.streaming.events import StopEvent, ToolCallEnd, ToolCallStart, UsageEvent
from awaken_s3.streaming.provider import ModelRequest


def test_prefill_whitespace_is_stripped_and_a_blank_prefill_is_dropped() -> None:
    question = Message.user("q")
    assert rstrip_prefill([question, Message.assistant("It is \n")])[-1] == Message.assistant(
        "It is"
    )
    assert rstrip_prefill([question, Message.assistant("   ")]) == [question]
    # Only a trailing assistant message is touched.
    assert rstrip_prefill([Message.assistant("a "), question]) == [
        Message.assistant("a "),
        question,
    ]


def test_anthropic_skips_empty_text_blocks_and_passes_extra() -> None:
    request = ModelRequest(
        model="m",
        messages=[Message(role="user", content=(TextBlock(text=""), TextBlock(text="hi")))],
        temperature=0.2,
        stop_sequences=["END"],
        extra={"metadata": {"user_id": "u1"}},
    )
    params = build_anthropic_request(request)
    assert params["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert params["temperature"] == 0.2
    assert params["stop_sequences"] == ["END"]
    assert params["metadata"] == {"user_id": "u1"}
    assert "system" not in params and "tools" not in params


def test_no_message_reaches_anthropic_or_bedrock_empty_or_with_blank_text() -> None:
    """Reasoning the provider cannot take (unsigned: another provider's) and blank text are
    dropped; a message left with nothing is left out, and the user messages it separated go
    as one (Bedrock refuses two in a row)."""
    unsigned = ThinkingBlock(thinking="from another provider")
    request = ModelRequest(
        model="m",
        messages=[
            Message.user("first"),
            Message(role="assistant", content=(unsigned, TextBlock(text=" \n"))),
            Message.user("second"),
            Message(role="assistant", content=(TextBlock(text="  "), TextBlock(text="ok"))),
            Message.user("third"),
        ],
    )
    anthropic = build_anthropic_request(request)["messages"]
    assert anthropic == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": [{"type": "text", "text": "third"}]},
    ]
    bedrock = build_converse_request(request)["messages"]
    assert bedrock == [
        {"role": "user", "content": [{"text": "first"}, {"text": "second"}]},
        {"role": "assistant", "content": [{"text": "ok"}]},
        {"role": "user", "content": [{"text": "third"}]},
    ]


def test_openai_tool_results_come_before_user_text_and_errors_are_marked() -> None:
    message = Message(
        role="user",
        content=(
            TextBlock(text="and also"),
            ToolResultBlock(tool_use_id="c1", content="boom", is_error=True),
            ToolResultBlock(tool_use_id="c2", content="ok"),
        ),
    )
    out = build_openai_messages(ModelRequest(model="m", messages=[message]))
    assert out == [
        {"role": "tool", "tool_call_id": "c1", "content": "Error: boom"},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
        {"role": "user", "content": "and also"},
    ]


def test_bedrock_tool_result_status_and_inference_config() -> None:
    request = ModelRequest(
        model="m",
        messages=[
            Message(
                role="assistant",
                content=(ToolUseBlock(id="t1", name="f", input={}),),
            ),
            Message(
                role="user",
                content=(ToolResultBlock(tool_use_id="t1", content="x", is_error=True),),
            ),
        ],
        temperature=0.0,
        stop_sequences=["STOP"],
    )
    params = build_converse_request(request)
    assert params["messages"][1]["content"][0]["toolResult"]["status"] == "error"
    assert params["inferenceConfig"] == {
        "maxTokens": 4096,
        "temperature": 0.0,
        "stopSequences": ["STOP"],
    }


def test_indexer_numbers_calls_in_start_order() -> None:
    indexer = ToolCallIndexer()
    assert [indexer.start(k) for k in (3, 1, 7)] == [0, 1, 2]
    assert indexer.end(1) == 1
    assert indexer.end(1) is None
    assert indexer.end_all() == [0, 2]


def test_stop_reasons_are_normalised() -> None:
    for raw, expected in [
        ("end_turn", "end_turn"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "max_tokens"),
        ("pause_turn", "pause_turn"),
        ("something_new", "other"),
    ]:
        t = AnthropicStreamTranslator()
        t.feed(NS(type="message_delta", delta=NS(stop_reason=raw), usage=None))
        assert t.feed(NS(type="message_stop")) == [StopEvent(expected)]
    for raw, expected in [("guardrail_intervened", "other"), ("max_tokens", "max_tokens")]:
        b = ConverseStreamTranslator()
        b.feed({"messageStop": {"stopReason": raw}})
        assert b.finish() == [StopEvent(expected)]
    for raw, expected in [("length", "max_tokens"), ("content_filter", "other")]:
        o = OpenAIStreamTranslator()
        o.feed(NS(choices=[NS(index=0, delta=None, finish_reason=raw)], usage=None))
        assert o.finish() == [StopEvent(expected)]


def test_anthropic_reports_cache_reads_and_writes_apart_from_input() -> None:
    t = AnthropicStreamTranslator()
    usage = NS(
        input_tokens=10,
        cache_creation_input_tokens=100,
        cache_read_input_tokens=1000,
        output_tokens=1,
    )
    assert t.feed(NS(type="message_start", message=NS(usage=usage))) == [
        UsageEvent(10, 1, cache_read_tokens=1000, cache_write_tokens=100)
    ]
    # message_delta carries only the fields that changed: the others keep their totals.
    delta = NS(type="message_delta", delta=NS(stop_reason="end_turn"), usage=NS(output_tokens=9))
    assert t.feed(delta) == [UsageEvent(10, 9, cache_read_tokens=1000, cache_write_tokens=100)]


def test_openai_ignores_other_choices_and_names_a_call_without_id() -> None:
    o = OpenAIStreamTranslator()
    call = NS(index=0, id=None, function=NS(name="f", arguments=""))
    other = NS(index=1, delta=NS(content="ignored", tool_calls=None), finish_reason=None)
    first = NS(index=0, delta=NS(content=None, tool_calls=[call]), finish_reason="tool_calls")
    assert o.feed(NS(choices=[other, first], usage=None)) == [
        ToolCallStart(0, "call_0", "f"),
        ToolCallEnd(0),
    ]
