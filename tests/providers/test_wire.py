"""Each adapter, with its real SDK, against a local server that speaks its wire format:
Anthropic Messages (SSE), OpenAI Chat Completions (SSE), Bedrock ConverseStream (AWS event
stream).

One table of scenarios, each played in every dialect that has it: the bytes a provider sends
and the events (and typed error) the runner gets from the adapter. Then what only one
dialect has: the shape of its requests, its prefill defaults, its own clients.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import aioboto3
import openai
import pytest

from awaken_s3.providers.anthropic import AnthropicProvider
from awaken_s3.providers.bedrock import BedrockConverseProvider, client_config
from awaken_s3.providers.openai import OpenAIChatProvider
from awaken_s3.streaming.errors import (
    AuthenticationFailed,
    ConnectionDropped,
    ContextOverflow,
    InvalidRequest,
    ModelNotFound,
    Overloaded,
    PrefillRejected,
    ProviderError,
    ServerError,
    StreamStalled,
    Throttled,
)
from awaken_s3.streaming.events import (
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from tests.providers.helpers import collect, simple_request, tool_history_request
from tests.providers.wire import anthropic_wire as aw
from tests.providers.wire import bedrock_wire as bw
from tests.providers.wire import openai_wire as ow
from tests.providers.wire.dialects import API_KEY, PREFILL_REJECTION, by_name
from tests.providers.wire.server import DROP, STALL, Scripted, WireServer

pytestmark = pytest.mark.slow


def in_an_hour() -> str:
    """A ``Retry-After`` HTTP date far beyond the cap the adapters put on any wait."""
    return format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)


@dataclass(frozen=True)
class Case:
    scenario: str
    dialect: str
    #: the response the server sends (built when the test runs: an HTTP date is "now")
    response: Callable[[], Scripted]
    #: every event the adapter yields, in order
    events: list[StreamEvent] = field(default_factory=list)
    #: the typed error that ends the stream (None: it completes)
    error: type[ProviderError] | None = None
    retryable: bool | None = None
    retry_after: float | None = None
    status: int | None = None
    idle_timeout: float = 5.0
    #: tells apart several cases of one scenario in one dialect
    variant: str = ""

    @property
    def id(self) -> str:
        return "-".join(part for part in (self.scenario, self.dialect, self.variant) if part)


# The parallel-tools scenario: two calls in one turn, arguments in fragments. The adapters
# number calls in stream order (0, 1), whatever block index the wire gives them.
PARALLEL_A = ['{"ci', 'ty": "Par', 'is"}']
PARALLEL_B = ['{"city":', ' "Oslo"}']


def calls_in_stream_order(first_id: str, second_id: str) -> list[StreamEvent]:
    return [
        ToolCallStart(0, first_id, "get_weather"),
        *(ToolCallDelta(0, f) for f in PARALLEL_A),
        ToolCallEnd(0),
        ToolCallStart(1, second_id, "get_weather"),
        *(ToolCallDelta(1, f) for f in PARALLEL_B),
        ToolCallEnd(1),
    ]


def anthropic_error_in_stream(error_type: str) -> Scripted:
    return aw.stream(
        aw.message_start(),
        aw.text_block(0, ["Some"])[:2],
        aw.in_stream_error(error_type, "Overloaded"),
    )


def bedrock_exception_in_stream(exception: str) -> Scripted:
    return bw.stream(
        bw.message_start(), bw.text(0, "Some"), bw.stream_exception(exception, "it broke")
    )


#: stands for an HTTP date an hour from now in a header value
HTTP_DATE = "<in an hour>"


def throttled(dialect: str, headers: dict[str, str]) -> Scripted:
    """A 429 before the stream, as each API words it."""
    headers = {k: in_an_hour() if v == HTTP_DATE else v for k, v in headers.items()}
    if dialect == "anthropic":
        return aw.error_response(429, "rate_limit_error", "Slow down", headers)
    if dialect == "bedrock":
        return bw.error_response(429, "ThrottlingException", "Too many requests", headers)
    return ow.error_response(
        429, "requests", "Rate limit reached", code="rate_limit_exceeded", headers=headers
    )


#: (scenario, dialect, the answer before the stream, the typed error): none is retryable
REFUSALS: list[tuple[str, str, Callable[[], Scripted], type[ProviderError]]] = [
    (
        "invalid-request",
        "anthropic",
        lambda: aw.error_response(400, "invalid_request_error", "max_tokens: must be positive"),
        InvalidRequest,
    ),
    (
        "invalid-request",
        "bedrock",
        lambda: bw.error_response(400, "ValidationException", "no"),
        InvalidRequest,
    ),
    (
        "invalid-request",
        "openai",
        lambda: ow.error_response(
            400, "invalid_request_error", "Invalid 'messages'", code="invalid_value"
        ),
        InvalidRequest,
    ),
    (
        "authentication",
        "anthropic",
        lambda: aw.error_response(401, "authentication_error", "invalid x-api-key"),
        AuthenticationFailed,
    ),
    (
        "authentication",
        "bedrock",
        lambda: bw.error_response(403, "AccessDeniedException", "no"),
        AuthenticationFailed,
    ),
    (
        "model-not-found",
        "bedrock",
        lambda: bw.error_response(404, "ResourceNotFoundException", "no"),
        ModelNotFound,
    ),
    (
        "model-not-found",
        "openai",
        lambda: ow.error_response(
            404, "invalid_request_error", "The model does not exist", code="model_not_found"
        ),
        ModelNotFound,
    ),
    (
        "context-overflow",
        "openai",
        lambda: ow.error_response(
            400, "invalid_request_error", "too many tokens", code="context_length_exceeded"
        ),
        ContextOverflow,
    ),
]


CASES = [
    # -- a text turn: text, usage and the stop reason, in the wire's order
    Case(
        "text-turn",
        "anthropic",
        lambda: aw.stream(
            aw.message_start(25),
            aw.ping(),
            aw.text_block(0, ["Hel", "lo", "!"]),
            aw.message_end("end_turn", 7),
        ),
        [
            UsageEvent(25, 1),
            TextDelta("Hel"),
            TextDelta("lo"),
            TextDelta("!"),
            UsageEvent(25, 7),
            StopEvent("end_turn"),
        ],
    ),
    Case(
        "text-turn",
        "bedrock",
        lambda: bw.stream(
            bw.message_start(),
            bw.text(0, "Hel"),
            bw.text(0, "lo"),
            bw.block_stop(0),
            bw.message_stop("end_turn"),
            bw.metadata(20, 4),
        ),
        [TextDelta("Hel"), TextDelta("lo"), UsageEvent(20, 4), StopEvent("end_turn")],
    ),
    Case(
        "text-turn",
        "openai",
        lambda: ow.stream(
            ow.role(), ow.text("Hel"), ow.text("lo"), ow.finish("stop"), ow.usage(12, 3), ow.DONE
        ),
        [TextDelta("Hel"), TextDelta("lo"), UsageEvent(12, 3), StopEvent("end_turn")],
    ),
    # -- parallel tool calls
    Case(
        "parallel-tool-calls",
        "anthropic",
        lambda: aw.stream(
            aw.message_start(),
            aw.text_block(0, ["Checking both."]),
            aw.tool_start(1, "toolu_A", "get_weather"),
            *(aw.tool_delta(1, f) for f in PARALLEL_A),
            aw.block_stop(1),
            aw.tool_start(2, "toolu_B", "get_weather"),
            *(aw.tool_delta(2, f) for f in PARALLEL_B),
            aw.block_stop(2),
            aw.message_end("tool_use", 40),
        ),
        [
            UsageEvent(25, 1),
            TextDelta("Checking both."),
            *calls_in_stream_order("toolu_A", "toolu_B"),
            UsageEvent(25, 40),
            StopEvent("tool_use"),
        ],
    ),
    Case(
        "parallel-tool-calls",
        "bedrock",
        lambda: bw.stream(
            bw.message_start(),
            bw.text(0, "Checking both."),
            bw.block_stop(0),
            bw.tool_start(1, "tooluse_A", "get_weather"),
            *(bw.tool_input(1, f) for f in PARALLEL_A),
            bw.block_stop(1),
            bw.tool_start(2, "tooluse_B", "get_weather"),
            *(bw.tool_input(2, f) for f in PARALLEL_B),
            bw.block_stop(2),
            bw.message_stop("tool_use"),
            bw.metadata(50, 30),
        ),
        [
            TextDelta("Checking both."),
            *calls_in_stream_order("tooluse_A", "tooluse_B"),
            UsageEvent(50, 30),
            StopEvent("tool_use"),
        ],
    ),
    Case(
        "parallel-tool-calls",
        "openai",
        lambda: ow.stream(
            ow.role(),
            ow.tool_start(0, "call_A", "get_weather"),
            *(ow.tool_args(0, f) for f in PARALLEL_A),
            ow.tool_start(1, "call_B", "get_weather"),
            *(ow.tool_args(1, f) for f in PARALLEL_B),
            ow.finish("tool_calls"),
            ow.usage(30, 20),
            ow.DONE,
        ),
        # Chat Completions closes no call before the finish reason: both end there.
        [
            ToolCallStart(0, "call_A", "get_weather"),
            *(ToolCallDelta(0, f) for f in PARALLEL_A),
            ToolCallStart(1, "call_B", "get_weather"),
            *(ToolCallDelta(1, f) for f in PARALLEL_B),
            ToolCallEnd(0),
            ToolCallEnd(1),
            UsageEvent(30, 20),
            StopEvent("tool_use"),
        ],
    ),
    # -- the connection drops mid-stream: what arrived is kept, the drop is retryable
    Case(
        "dropped-mid-stream",
        "anthropic",
        lambda: aw.stream(aw.message_start(), aw.text_block(0, ["Partial ", "answer"])[:2], DROP),
        [UsageEvent(25, 1), TextDelta("Partial ")],
        ConnectionDropped,
        retryable=True,
    ),
    Case(
        "dropped-mid-stream",
        "bedrock",
        lambda: bw.stream(
            bw.message_start(),
            bw.tool_start(0, "tooluse_A", "get_weather"),
            bw.tool_input(0, '{"ci'),
            DROP,
        ),
        [ToolCallStart(0, "tooluse_A", "get_weather"), ToolCallDelta(0, '{"ci')],
        ConnectionDropped,
        retryable=True,
    ),
    Case(
        "dropped-mid-stream",
        "openai",
        lambda: ow.stream(
            ow.role(), ow.tool_start(0, "call_A", "get_weather"), ow.tool_args(0, '{"ci'), DROP
        ),
        [ToolCallStart(0, "call_A", "get_weather"), ToolCallDelta(0, '{"ci')],
        ConnectionDropped,
        retryable=True,
    ),
    # -- a clean close before the stop reason is a drop too
    Case(
        "closed-before-the-stop-reason",
        "anthropic",
        lambda: aw.stream(aw.message_start(), aw.text_block(0, ["cut"])),
        [UsageEvent(25, 1), TextDelta("cut")],
        ConnectionDropped,
    ),
    Case(
        "closed-before-the-stop-reason",
        "bedrock",
        lambda: bw.stream(bw.message_start(), bw.text(0, "cut")),
        [TextDelta("cut")],
        ConnectionDropped,
    ),
    Case(
        "closed-before-the-stop-reason",
        "openai",
        lambda: ow.stream(ow.text("cut"), ow.DONE),
        [TextDelta("cut")],
        ConnectionDropped,
    ),
    # -- a drop after the stop reason loses nothing: the turn completes
    Case(
        "dropped-after-the-stop-reason",
        "anthropic",
        lambda: aw.stream(
            aw.message_start(), aw.text_block(0, ["whole"]), aw.message_end("end_turn", 3)[0], DROP
        ),
        [UsageEvent(25, 1), TextDelta("whole"), UsageEvent(25, 3), StopEvent("end_turn")],
    ),
    Case(
        "dropped-after-the-stop-reason",
        "bedrock",
        lambda: bw.stream(
            bw.message_start(), bw.text(0, "whole"), bw.message_stop("end_turn"), DROP
        ),
        [TextDelta("whole"), StopEvent("end_turn")],
    ),
    Case(
        "dropped-after-the-stop-reason",
        "openai",
        lambda: ow.stream(ow.text("whole"), ow.finish("stop"), DROP),
        [TextDelta("whole"), StopEvent("end_turn")],
    ),
    # -- a stream that stops sending is abandoned after the idle timeout
    Case(
        "stalled",
        "anthropic",
        lambda: aw.stream(aw.message_start(), aw.text_block(0, ["slow"])[:2], STALL),
        [UsageEvent(25, 1), TextDelta("slow")],
        StreamStalled,
        idle_timeout=0.3,
    ),
    Case(
        "stalled",
        "bedrock",
        lambda: bw.stream(bw.message_start(), bw.text(0, "slow"), STALL),
        [TextDelta("slow")],
        StreamStalled,
        idle_timeout=0.3,
    ),
    Case(
        "stalled",
        "openai",
        lambda: ow.stream(ow.text("slow"), STALL),
        [TextDelta("slow")],
        StreamStalled,
        idle_timeout=0.3,
    ),
    # -- an error event inside the stream keeps the partial and is typed
    *(
        Case(
            "error-in-the-stream",
            "anthropic",
            functools.partial(anthropic_error_in_stream, error_type),
            [UsageEvent(25, 1), TextDelta("Some")],
            error,
            retryable=True,
            variant=error_type,
        )
        for error_type, error in [("overloaded_error", Overloaded), ("api_error", ServerError)]
    ),
    *(
        Case(
            "error-in-the-stream",
            "bedrock",
            functools.partial(bedrock_exception_in_stream, exception),
            [TextDelta("Some")],
            error,
            variant=exception,
        )
        for exception, error in [
            ("throttlingException", Throttled),
            ("serviceUnavailableException", Overloaded),
            ("modelStreamErrorException", ServerError),
            ("internalServerException", ServerError),
            ("validationException", InvalidRequest),
        ]
    ),
    Case(
        "error-in-the-stream",
        "openai",
        lambda: ow.stream(
            ow.text("Some"), ow.in_stream_error("server_error", "The server had an error")
        ),
        [TextDelta("Some")],
        ServerError,
        retryable=True,
    ),
    # -- 429 before the stream: the wait the server asks for, capped at 60 s
    *(
        Case(
            "throttled",
            dialect,
            functools.partial(throttled, dialect, headers),
            error=Throttled,
            retry_after=wait,
            status=429,
            variant=variant,
        )
        for dialect, variant, headers, wait in [
            ("anthropic", "seconds", {"retry-after": "7"}, 7.0),
            ("anthropic", "http-date", {"retry-after": HTTP_DATE}, 60.0),
            ("bedrock", "seconds", {"Retry-After": "4"}, 4.0),
            ("bedrock", "http-date", {"Retry-After": HTTP_DATE}, 60.0),
            ("openai", "seconds", {"retry-after": "3"}, 3.0),
            ("openai", "milliseconds-first", {"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
            ("openai", "http-date", {"retry-after": HTTP_DATE}, 60.0),
            ("openai", "no-hint", {}, None),
        ]
    ),
    # -- 5xx before the stream: retryable, without a hint, and not retried by the SDK
    Case(
        "unavailable",
        "anthropic",
        lambda: aw.error_response(529, "overloaded_error", "Overloaded"),
        error=Overloaded,
        retryable=True,
        status=529,
    ),
    Case(
        "unavailable",
        "bedrock",
        lambda: bw.error_response(503, "ServiceUnavailableException", "try later"),
        error=Overloaded,
        retryable=True,
        status=503,
    ),
    Case(
        "unavailable",
        "openai",
        lambda: ow.error_response(500, "server_error", "boom"),
        error=ServerError,
        retryable=True,
        status=500,
    ),
    # -- refusals no retry can cure
    *(
        Case(scenario, dialect, response, error=error, retryable=False)
        for scenario, dialect, response, error in REFUSALS
    ),
]


def text_turn(dialect: str) -> Scripted:
    return next(c for c in CASES if (c.scenario, c.dialect) == ("text-turn", dialect)).response()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_the_wire_becomes_stream_events_and_typed_errors(
    wire: WireServer, case: Case
) -> None:
    d = by_name(case.dialect)
    wire.push(case.response())
    events, error = await collect(
        d.provider(wire, idle_timeout=case.idle_timeout), simple_request(d.model)
    )
    assert events == case.events
    if case.error is None:
        assert error is None
    else:
        assert type(error) is case.error, repr(error)
        assert error is not None
        assert error.retry_after == case.retry_after
        if case.retryable is not None:
            assert error.retryable is case.retryable
        if case.status is not None:
            assert error.status == case.status
    # The SDKs' own retries are off: the runner owns the retry policy.
    assert len(wire.received) == 1


# -- what a request carries ----------------------------------------------------------------

#: (dialect, the stream answering the request, the assistant message of
#: ``tool_history_request`` as sent, then the tool result as sent)
TOOL_HISTORY: list[tuple[str, Callable[[], Scripted], dict[str, Any], dict[str, Any]]] = [
    (
        "anthropic",
        lambda: aw.stream(aw.message_start(), aw.text_block(0, ["Cloudy."]), aw.message_end()),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1",
                    "content": "18C, cloudy",
                    "is_error": False,
                }
            ],
        },
    ),
    (
        "bedrock",
        lambda: bw.stream(bw.message_start(), bw.text(0, "ok"), bw.message_stop("end_turn")),
        {
            "role": "assistant",
            "content": [
                {"text": "Checking."},
                {
                    "toolUse": {
                        "toolUseId": "call_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "call_1",
                        "content": [{"text": "18C, cloudy"}],
                        "status": "success",
                    }
                }
            ],
        },
    ),
    (
        "openai",
        lambda: ow.stream(ow.text("Cloudy."), ow.finish("stop"), ow.usage(1, 1), ow.DONE),
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C, cloudy"},
    ),
]


@pytest.mark.parametrize(
    ("dialect", "response", "call", "result"), TOOL_HISTORY, ids=[t[0] for t in TOOL_HISTORY]
)
async def test_a_tool_call_and_its_result_go_out_in_the_dialect_s_blocks(
    wire: WireServer,
    dialect: str,
    response: Callable[[], Scripted],
    call: dict[str, Any],
    result: dict[str, Any],
) -> None:
    d = by_name(dialect)
    wire.push(response())
    _, error = await collect(d.provider(wire), tool_history_request(d.model))
    assert error is None
    sent = wire.received[0].json()["messages"]
    assert (sent[1], sent[2]) == (call, result)


#: (dialect, the refusal, the prefill given, the trailing assistant message as sent)
PREFILL: list[tuple[str, Callable[[], Scripted], str, dict[str, Any]]] = [
    (
        "anthropic",
        lambda: aw.error_response(400, "invalid_request_error", PREFILL_REJECTION),
        "The weather is ",
        # The API rejects a prefill ending in white space: it goes out trimmed.
        {"role": "assistant", "content": [{"type": "text", "text": "The weather is"}]},
    ),
    (
        "bedrock",
        lambda: bw.error_response(400, "ValidationException", PREFILL_REJECTION),
        "The weather ",
        {"role": "assistant", "content": [{"text": "The weather"}]},
    ),
    (
        "openai",
        # A compatible server that refuses a trailing assistant message, in its own words.
        lambda: ow.error_response(
            400,
            "BadRequestError",
            "This model does not support assistant message prefill; the final message must be "
            "a user message",
            code="400",
        ),
        "It is",
        {"role": "assistant", "content": "It is"},
    ),
]


@pytest.mark.parametrize(
    ("dialect", "response", "prefill", "sent"), PREFILL, ids=[p[0] for p in PREFILL]
)
async def test_a_rejected_prefill_is_prefill_rejected(
    wire: WireServer,
    dialect: str,
    response: Callable[[], Scripted],
    prefill: str,
    sent: dict[str, Any],
) -> None:
    d = by_name(dialect)
    wire.push(response())
    _, error = await collect(d.provider(wire), simple_request(d.model, prefill=prefill))
    assert isinstance(error, PrefillRejected)
    assert not error.retryable
    assert wire.received[0].json()["messages"][-1] == sent


async def test_an_anthropic_request(wire: WireServer) -> None:
    d = by_name("anthropic")
    wire.push(text_turn("anthropic"))
    await collect(d.provider(wire), simple_request(d.model))
    sent = wire.received[0]
    assert sent.path == "/v1/messages"
    # SDK 2.x sends the key as a bearer token, older ones as x-api-key.
    sent_key = sent.headers.get("x-api-key") or sent.headers.get("authorization", "")[7:]
    assert sent_key == API_KEY
    body = sent.json()
    assert body["stream"] is True
    assert body["system"] == "Be brief."
    assert body["tools"][0]["name"] == "get_weather"
    assert body["tools"][0]["input_schema"]["properties"]["city"] == {"type": "string"}
    assert sent.headers.get("x-stainless-retry-count") == "0"


async def test_a_bedrock_request(wire: WireServer) -> None:
    d = by_name("bedrock")
    wire.push(text_turn("bedrock"))
    await collect(d.provider(wire), simple_request(d.model))
    sent = wire.received[0]
    assert sent.path == f"/model/{d.model}/converse-stream"
    assert sent.headers["authorization"].startswith("AWS4-HMAC-SHA256")
    body = sent.json()
    assert body["system"] == [{"text": "Be brief."}]
    assert body["inferenceConfig"] == {"maxTokens": 4096}
    assert body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["type"] == "object"


async def test_an_openai_compatible_request(wire: WireServer) -> None:
    d = by_name("openai")
    wire.push(text_turn("openai"))
    await collect(d.provider(wire), simple_request(d.model))
    sent = wire.received[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    body = sent.json()
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["tools"][0]["function"]["name"] == "get_weather"
    # A custom base_url means a compatible server: the widely accepted parameter.
    assert body["max_tokens"] == 4096


async def test_openai_itself_gets_max_completion_tokens(wire: WireServer) -> None:
    # A ready client (no base_url given to the provider) means OpenAI itself, whose reasoning
    # models refuse ``max_tokens``.
    client = openai.AsyncOpenAI(api_key="k", base_url=f"{wire.url}/v1", max_retries=0)
    wire.push(ow.stream(ow.text("ok"), ow.finish("stop"), ow.DONE))
    _, error = await collect(OpenAIChatProvider(client=client), simple_request(ow.MODEL))
    await client.close()
    assert error is None
    body = wire.received[0].json()
    assert body["max_completion_tokens"] == 4096
    assert "max_tokens" not in body


async def test_a_caller_owned_bedrock_client_is_used(wire: WireServer) -> None:
    config = client_config(idle_timeout=5.0, connect_timeout=5.0)
    async with aioboto3.Session().client(
        "bedrock-runtime", region_name="us-east-1", endpoint_url=wire.url, config=config
    ) as client:
        p = BedrockConverseProvider(client=client)
        for _ in range(2):
            wire.push(bw.stream(bw.message_start(), bw.text(0, "hi"), bw.message_stop("end_turn")))
            events, error = await collect(p, simple_request(bw.MODEL))
            assert error is None
            assert events == [TextDelta("hi"), StopEvent("end_turn")]


# -- which models take a prefill, by default and as configured -------------------------------


def test_anthropic_prefill_defaults_and_override() -> None:
    p = AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9")
    assert p.capabilities("claude-3-7-sonnet-20250219").assistant_prefill is True
    assert p.capabilities("claude-sonnet-4-5").assistant_prefill is True
    assert p.capabilities("claude-opus-4-6").assistant_prefill is False
    forced = AnthropicProvider(
        api_key="k", base_url="http://127.0.0.1:9", prefill={"claude-opus-4-6": True}
    )
    assert forced.capabilities("claude-opus-4-6").assistant_prefill is True
    assert forced.capabilities("claude-opus-4-7").assistant_prefill is False


def test_bedrock_prefill_defaults_for_model_ids() -> None:
    p = BedrockConverseProvider(region_name="us-east-1")
    assert p.capabilities("anthropic.claude-3-5-sonnet-20240620-v1:0").assistant_prefill
    assert p.capabilities("us.anthropic.claude-sonnet-4-5-20250929-v1:0").assistant_prefill
    assert not p.capabilities("us.anthropic.claude-opus-4-6-v1:0").assistant_prefill
    assert not p.capabilities("amazon.nova-pro-v1:0").assistant_prefill
    custom = BedrockConverseProvider(
        region_name="us-east-1", prefill=lambda m: True if m.startswith("amazon.nova") else None
    )
    assert custom.capabilities("amazon.nova-pro-v1:0").assistant_prefill
    assert not custom.capabilities("us.anthropic.claude-opus-4-6-v1:0").assistant_prefill


def test_chat_completions_has_no_prefill_by_default() -> None:
    p = OpenAIChatProvider(api_key="k")
    assert p.capabilities("gpt-4.1").assistant_prefill is False
    assert OpenAIChatProvider(api_key="k", prefill=True).capabilities("x").assistant_prefill
