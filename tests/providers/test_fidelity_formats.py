"""Provider fidelity details (pure): reasoning and server blocks sent back, tool-call
identity on OpenAI-compatible servers, refusals, cache usage, continuation-only fields,
the thinking-on prefill rejection and unknown Claude families."""

from __future__ import annotations

import base64
from types import SimpleNamespace as NS
from typing import Any

import pytest

from awaken_s3.messages import (
    Message,
    ProviderBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from awaken_s3.providers.anthropic import AnthropicProvider
from awaken_s3.providers.anthropic_format import AnthropicStreamTranslator, build_anthropic_request
from awaken_s3.providers.bedrock import BedrockConverseProvider
from awaken_s3.providers.bedrock_format import build_converse_request
from awaken_s3.providers.classify import classify_bedrock_error, classify_http_error
from awaken_s3.providers.openai_format import (
    OpenAIStreamTranslator,
    ToolCallIdentity,
    build_openai_request,
)
from awaken_s3.providers.prefill import claude_generation, default_claude_prefill
from awaken_s3.streaming.errors import InvalidRequest, PrefillRejected
from awaken_s3.streaming.events import (
    ReasoningDelta,
    ReasoningEnd,
    RefusalDelta,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.provider import ModelRequest

SIGNED = ThinkingBlock(thinking="Check Oslo.", signature="c2ln")
UNSIGNED = ThinkingBlock(thinking="from vLLM")
REDACTED = RedactedThinkingBlock(data=base64.b64encode(b"\x00secret").decode())
SEARCH = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"q": "x"}}
RESULT = {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []}
CALL = ToolUseBlock(id="t1", name="weather", input={"city": "Oslo"})

TURN = Message(
    role="assistant",
    content=(
        SIGNED,
        UNSIGNED,
        REDACTED,
        ProviderBlock(provider="anthropic", block=SEARCH),
        ProviderBlock(provider="anthropic", block=RESULT),
        ProviderBlock(provider="other", block={"type": "x"}),
        TextBlock(text="Checking."),
        CALL,
    ),
)
HISTORY = (Message.user("Weather?"), TURN)


def test_anthropic_sends_reasoning_and_its_server_blocks_back_unchanged() -> None:
    sent = build_anthropic_request(ModelRequest(model="m", messages=HISTORY))["messages"][1]
    assert sent["content"] == [
        {"type": "thinking", "thinking": "Check Oslo.", "signature": "c2ln"},
        {"type": "redacted_thinking", "data": REDACTED.data},
        SEARCH,
        RESULT,
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}},
    ]


def test_bedrock_sends_reasoning_back_as_reasoning_content() -> None:
    sent = build_converse_request(ModelRequest(model="m", messages=HISTORY))["messages"][1]
    assert sent["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "Check Oslo.", "signature": "c2ln"}}},
        {"reasoningContent": {"redactedContent": b"\x00secret"}},
        {"text": "Checking."},
        {"toolUse": {"toolUseId": "t1", "name": "weather", "input": {"city": "Oslo"}}},
    ]


def test_openai_sends_neither_reasoning_nor_server_blocks() -> None:
    params = build_openai_request(
        ModelRequest(model="m", messages=HISTORY), max_tokens_param="max_tokens"
    )
    assistant = params["messages"][1]
    assert assistant["content"] == "Checking."
    assert [c["id"] for c in assistant["tool_calls"]] == ["t1"]


def test_anthropic_tool_use_start_input_is_used_when_no_fragments_follow() -> None:
    t = AnthropicStreamTranslator()
    start = NS(type="tool_use", id="t1", name="weather", input={"city": "Oslo"})
    assert t.feed(NS(type="content_block_start", index=0, content_block=start)) == [
        ToolCallStart(0, "t1", "weather")
    ]
    assert t.feed(NS(type="content_block_stop", index=0)) == [
        ToolCallDelta(0, '{"city": "Oslo"}'),
        ToolCallEnd(0),
    ]
    # When fragments follow, they are the input (the API starts every block with {}).
    t = AnthropicStreamTranslator()
    t.feed(NS(type="content_block_start", index=0, content_block=start))
    fragment = NS(type="input_json_delta", partial_json='{"city": "Paris"}')
    t.feed(NS(type="content_block_delta", index=0, delta=fragment))
    assert t.feed(NS(type="content_block_stop", index=0)) == [ToolCallEnd(0)]


# -- OpenAI-compatible tool-call identity ----------------------------------------


def fragment(
    index: int | None = None, call_id: str | None = None, name: str = "", args: str = ""
) -> Any:
    return NS(index=index, id=call_id, function=NS(name=name or None, arguments=args or None))


@pytest.mark.parametrize(
    ("fragments", "events"),
    [
        pytest.param(
            [fragment(0, "a", "f", '{"x":'), fragment(0, args="1}"), fragment(1, "b", "g", "{}")],
            [
                ToolCallStart(0, "a", "f"),
                ToolCallDelta(0, '{"x":'),
                ToolCallDelta(0, "1}"),
                ToolCallStart(1, "b", "g"),
                ToolCallDelta(1, "{}"),
            ],
            id="openai",
        ),
        pytest.param(
            [fragment(0, "a", "f", "{}"), fragment(0, "b", "g", '{"y": 2}')],
            [
                ToolCallStart(0, "a", "f"),
                ToolCallDelta(0, "{}"),
                ToolCallStart(1, "b", "g"),
                ToolCallDelta(1, '{"y": 2}'),
            ],
            id="ollama-every-call-index-0",
        ),
        pytest.param(
            [fragment(None, "a", "f", "{}"), fragment(None, "b", "g", "{}")],
            [
                ToolCallStart(0, "a", "f"),
                ToolCallDelta(0, "{}"),
                ToolCallStart(1, "b", "g"),
                ToolCallDelta(1, "{}"),
            ],
            id="gemini-no-index",
        ),
        pytest.param(
            [fragment(0, "a"), fragment(0, name="f"), fragment(0, args="{}")],
            [ToolCallStart(0, "a", ""), ToolCallStart(0, "", "f"), ToolCallDelta(0, "{}")],
            id="late-name",
        ),
        pytest.param(
            [fragment(0, name="f"), fragment(0, "a", args="{}"), fragment(0, "b", "g")],
            [
                ToolCallStart(0, "call_0", "f"),
                ToolCallDelta(0, "{}"),
                ToolCallStart(1, "b", "g"),
            ],
            id="id-after-the-first-fragment-is-the-same-call",
        ),
        pytest.param(
            [fragment(None, "a", "f", '{"x":'), fragment(None, args="1}")],
            [ToolCallStart(0, "a", "f"), ToolCallDelta(0, '{"x":'), ToolCallDelta(0, "1}")],
            id="neither-continues-the-latest",
        ),
    ],
)
def test_tool_call_identity(fragments: list[Any], events: list[StreamEvent]) -> None:
    identity = ToolCallIdentity()
    assert [e for f in fragments for e in identity.fragment(f)] == events


def chunk(delta: Any = None, finish: str | None = None, usage: Any = None) -> Any:
    choices = [NS(index=0, delta=delta, finish_reason=finish)] if delta or finish else []
    return NS(choices=choices, usage=usage)


def delta(**fields: Any) -> Any:
    base: dict[str, Any] = {"content": None, "tool_calls": None, "refusal": None}
    return NS(**{**base, **fields})


def test_openai_refusal_reasoning_and_cached_usage() -> None:
    t = OpenAIStreamTranslator()
    events = [
        *t.feed(chunk(delta(reasoning_content="Hmm."))),
        *t.feed(chunk(delta(refusal="I can't."))),
        *t.feed(chunk(finish="stop")),
        *t.feed(
            chunk(
                usage=NS(
                    prompt_tokens=100,
                    completion_tokens=4,
                    prompt_tokens_details=NS(cached_tokens=60),
                )
            )
        ),
        *t.finish(),
    ]
    assert events == [
        ReasoningDelta(0, text="Hmm."),
        ReasoningEnd(0),
        RefusalDelta("I can't."),
        UsageEvent(40, 4, cache_read_tokens=60),
        StopEvent("refusal"),
    ]


def test_openai_reasoning_that_resumes_after_content_opens_a_new_block() -> None:
    t = OpenAIStreamTranslator()
    events = [
        *t.feed(chunk(delta(reasoning="a"))),
        *t.feed(chunk(delta(content="x"))),
        *t.feed(chunk(delta(reasoning="b"))),
    ]
    assert events == [
        ReasoningDelta(0, text="a"),
        ReasoningEnd(0),
        TextDelta("x"),
        ReasoningDelta(1, text="b"),
    ]


# -- request fields ------------------------------------------------------------------

VLLM = {"continue_final_message": True, "add_generation_prompt": False, "top_k": 5}


@pytest.mark.parametrize(
    ("messages", "extra_body"),
    [
        ((Message.user("q"),), {"top_k": 5}),
        ((Message.user("q"), Message.assistant("It is ")), VLLM),
    ],
    ids=["first-request", "continuation"],
)
def test_vllm_continuation_fields_go_only_on_a_continuation(
    messages: tuple[Message, ...], extra_body: dict[str, Any]
) -> None:
    request = ModelRequest(model="m", messages=messages, extra={"extra_body": VLLM})
    assert build_openai_request(request, max_tokens_param="max_tokens")["extra_body"] == extra_body


def test_continuation_extra_and_provider_defaults_merge_one_level_deep() -> None:
    request = ModelRequest(
        model="m",
        messages=(Message.user("q"), Message.assistant("It is \n")),
        extra={"extra_body": {"top_k": 5}},
        continuation_extra={"extra_body": {"continue_final_message": True}},
    )
    params = build_openai_request(
        request, max_tokens_param="max_tokens", defaults={"extra_body": {"top_p": 0.9}}
    )
    assert params["extra_body"] == {"top_p": 0.9, "top_k": 5, "continue_final_message": True}
    # The prefix goes out without its trailing whitespace, as with the other adapters.
    assert params["messages"][-1] == {"role": "assistant", "content": "It is"}
    first = ModelRequest(model="m", messages=(Message.user("q"),), continuation_extra={"x": 1})
    assert "x" not in build_anthropic_request(first)


def test_thinking_on_turns_the_prefill_default_off() -> None:
    thinking = {"type": "enabled", "budget_tokens": 1024}
    model = "claude-sonnet-4-5"
    assert AnthropicProvider(api_key="k").capabilities(model).assistant_prefill
    on = AnthropicProvider(api_key="k", extra={"thinking": thinking})
    assert not on.capabilities(model).assistant_prefill
    off = AnthropicProvider(api_key="k", extra={"thinking": {"type": "disabled"}})
    assert off.capabilities(model).assistant_prefill
    bedrock = BedrockConverseProvider(
        extra={"additionalModelRequestFields": {"thinking": thinking}}
    )
    assert not bedrock.capabilities(f"us.anthropic.{model}-20250929-v1:0").assistant_prefill
    # An explicit override still wins.
    forced = AnthropicProvider(api_key="k", extra={"thinking": thinking}, prefill=True)
    assert forced.capabilities(model).assistant_prefill


# -- prefill rejection wording and unknown families -----------------------------------

THINKING_PREFILL = (
    "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. "
    "When `thinking` is enabled, a final `assistant` message must start with a thinking block"
)


def test_the_thinking_on_prefill_rejection_is_a_prefill_rejection() -> None:
    common: dict[str, Any] = {"status": 400, "error_type": "invalid_request_error", "provider": "a"}
    rejected = classify_http_error(message=THINKING_PREFILL, sent_prefill=True, **common)
    assert isinstance(rejected, PrefillRejected)
    # The same words for a tool-loop request (no prefill) are an ordinary bad request.
    assert type(classify_http_error(message=THINKING_PREFILL, **common)) is InvalidRequest
    bedrock = classify_bedrock_error(
        code="ValidationException", message=THINKING_PREFILL, status=400, sent_prefill=True
    )
    assert isinstance(bedrock, PrefillRejected)


@pytest.mark.parametrize(
    ("model", "generation"),
    [
        ("claude-fable-5", None),
        ("us.anthropic.claude-nebula-1-v1:0", None),
        ("claude-next", None),
        ("anthropic.claude-v2:1", (2, 0)),
        ("anthropic.claude-instant-v1", (1, 0)),
    ],
)
def test_a_claude_of_an_unknown_family_defaults_to_no_prefill(
    model: str, generation: tuple[int, int] | None
) -> None:
    assert claude_generation(model) == generation
    assert default_claude_prefill(model) is (generation is not None)
