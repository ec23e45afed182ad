"""OpenAIChatProvider with the real openai SDK against a local /v1/chat/completions (SSE)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from awaken_s3.providers.openai import OpenAIChatProvider
from awaken_s3.streaming.errors import (
    ConnectionDropped,
    ContextOverflow,
    InvalidRequest,
    ModelNotFound,
    PrefillRejected,
    ServerError,
    StreamStalled,
    Throttled,
)
from awaken_s3.streaming.events import (
    StopEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from tests.providers.helpers import collect, simple_request, tool_history_request
from tests.providers.wire import openai_wire as ow
from tests.providers.wire.server import DROP, STALL, WireServer

pytestmark = pytest.mark.slow

MODEL = ow.MODEL


def provider(wire: WireServer, *, idle_timeout: float = 5.0) -> OpenAIChatProvider:
    return wire.track(
        OpenAIChatProvider(api_key="sk-test", base_url=f"{wire.url}/v1", idle_timeout=idle_timeout)
    )


async def test_text_turn_streams_text_usage_and_stop(wire: WireServer) -> None:
    wire.push(
        ow.stream(
            ow.role(), ow.text("Hel"), ow.text("lo"), ow.finish("stop"), ow.usage(12, 3), ow.DONE
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert error is None
    assert events == [TextDelta("Hel"), TextDelta("lo"), UsageEvent(12, 3), StopEvent("end_turn")]
    sent = wire.received[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    body = sent.json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["tools"][0]["function"]["name"] == "get_weather"
    # A custom base_url means a compatible server: the widely accepted parameter.
    assert body["max_tokens"] == 4096
    assert sent.headers.get("x-stainless-retry-count") == "0"


async def test_parallel_tool_calls_close_at_finish_reason(wire: WireServer) -> None:
    wire.push(
        ow.stream(
            ow.role(),
            ow.tool_start(0, "call_A", "get_weather"),
            ow.tool_args(0, '{"ci'),
            ow.tool_args(0, 'ty": "Paris"}'),
            ow.tool_start(1, "call_B", "get_weather"),
            ow.tool_args(1, '{"city": '),
            ow.tool_args(1, '"Oslo"}'),
            ow.finish("tool_calls"),
            ow.usage(30, 20),
            ow.DONE,
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert error is None
    assert events == [
        ToolCallStart(0, "call_A", "get_weather"),
        ToolCallDelta(0, '{"ci'),
        ToolCallDelta(0, 'ty": "Paris"}'),
        ToolCallStart(1, "call_B", "get_weather"),
        ToolCallDelta(1, '{"city": '),
        ToolCallDelta(1, '"Oslo"}'),
        ToolCallEnd(0),
        ToolCallEnd(1),
        UsageEvent(30, 20),
        StopEvent("tool_use"),
    ]


async def test_tool_history_maps_to_tool_calls_and_tool_messages(wire: WireServer) -> None:
    wire.push(ow.stream(ow.text("Cloudy."), ow.finish("stop"), ow.usage(1, 1), ow.DONE))
    _, error = await collect(provider(wire), tool_history_request(MODEL))
    assert error is None
    messages = wire.received[0].json()["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "18C, cloudy"}


async def test_connection_dropped_mid_stream(wire: WireServer) -> None:
    wire.push(
        ow.stream(
            ow.role(), ow.tool_start(0, "call_A", "get_weather"), ow.tool_args(0, '{"ci'), DROP
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == [ToolCallStart(0, "call_A", "get_weather"), ToolCallDelta(0, '{"ci')]
    assert isinstance(error, ConnectionDropped)


async def test_stream_without_finish_reason_is_a_drop(wire: WireServer) -> None:
    wire.push(ow.stream(ow.text("cut"), ow.DONE))
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == [TextDelta("cut")]
    assert isinstance(error, ConnectionDropped)


async def test_drop_after_finish_reason_still_completes(wire: WireServer) -> None:
    wire.push(ow.stream(ow.text("whole"), ow.finish("stop"), DROP))
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert error is None
    assert events == [TextDelta("whole"), StopEvent("end_turn")]


async def test_stall_is_stream_stalled(wire: WireServer) -> None:
    wire.push(ow.stream(ow.text("slow"), STALL))
    events, error = await collect(provider(wire, idle_timeout=0.3), simple_request(MODEL))
    assert events == [TextDelta("slow")]
    assert isinstance(error, StreamStalled)


async def test_in_stream_server_error(wire: WireServer) -> None:
    wire.push(
        ow.stream(ow.text("Some"), ow.in_stream_error("server_error", "The server had an error"))
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == [TextDelta("Some")]
    assert isinstance(error, ServerError)
    assert error.retryable


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "HTTP-DATE"}, 60.0),
        ({}, None),
    ],
)
async def test_429_retry_after(
    wire: WireServer, headers: dict[str, str], expected: float | None
) -> None:
    if headers.get("retry-after") == "HTTP-DATE":
        headers = {
            "retry-after": format_datetime(datetime.now(UTC) + timedelta(minutes=5), usegmt=True)
        }
    wire.push(
        ow.error_response(
            429, "requests", "Rate limit reached", code="rate_limit_exceeded", headers=headers
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == []
    assert isinstance(error, Throttled)
    assert error.retry_after == expected
    assert len(wire.received) == 1


async def test_500_before_stream_is_server_error(wire: WireServer) -> None:
    wire.push(ow.error_response(500, "server_error", "boom"))
    _, error = await collect(provider(wire), simple_request(MODEL))
    assert isinstance(error, ServerError)
    assert error.status == 500
    assert len(wire.received) == 1  # no SDK retry


async def test_permanent_400(wire: WireServer) -> None:
    wire.push(
        ow.error_response(400, "invalid_request_error", "Invalid 'messages'", code="invalid_value")
    )
    _, error = await collect(provider(wire), simple_request(MODEL))
    assert type(error) is InvalidRequest
    assert error is not None and not error.retryable


async def test_context_length_exceeded_by_code(wire: WireServer) -> None:
    wire.push(
        ow.error_response(
            400, "invalid_request_error", "too many tokens", code="context_length_exceeded"
        )
    )
    _, error = await collect(provider(wire), simple_request(MODEL))
    assert isinstance(error, ContextOverflow)


async def test_model_not_found(wire: WireServer) -> None:
    wire.push(
        ow.error_response(
            404, "invalid_request_error", "The model does not exist", code="model_not_found"
        )
    )
    _, error = await collect(provider(wire), simple_request(MODEL))
    assert isinstance(error, ModelNotFound)


async def test_rejected_prefill_on_a_compatible_server(wire: WireServer) -> None:
    # A compatible server that refuses a trailing assistant message.
    wire.push(
        ow.error_response(
            400,
            "BadRequestError",
            "This model does not support assistant message prefill; the final message must be "
            "a user message",
            code="400",
        )
    )
    _, error = await collect(provider(wire), simple_request(MODEL, prefill="It is"))
    assert isinstance(error, PrefillRejected)
    assert not error.retryable
    assert wire.received[0].json()["messages"][-1] == {"role": "assistant", "content": "It is"}


def test_chat_completions_has_no_prefill_by_default() -> None:
    p = OpenAIChatProvider(api_key="k")
    assert p.capabilities("gpt-4.1").assistant_prefill is False
    assert OpenAIChatProvider(api_key="k", prefill=True).capabilities("x").assistant_prefill


async def test_openai_itself_gets_max_completion_tokens(wire: WireServer) -> None:
    import openai

    # A ready client (no base_url given to the provider) means OpenAI itself,
    # whose reasoning models refuse ``max_tokens``.
    client = openai.AsyncOpenAI(api_key="k", base_url=f"{wire.url}/v1", max_retries=0)
    wire.push(ow.stream(ow.text("ok"), ow.finish("stop"), ow.DONE))
    _, error = await collect(OpenAIChatProvider(client=client), simple_request(MODEL))
    await client.close()
    assert error is None
    body = wire.received[0].json()
    assert body["max_completion_tokens"] == 4096
    assert "max_tokens" not in body
