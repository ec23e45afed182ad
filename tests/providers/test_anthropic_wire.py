"""AnthropicProvider with the real anthropic SDK against a local Messages API (SSE)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from awaken_s3.providers.anthropic import AnthropicProvider
from awaken_s3.streaming.errors import (
    AuthenticationFailed,
    ConnectionDropped,
    InvalidRequest,
    Overloaded,
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
from tests.providers.wire import anthropic_wire as aw
from tests.providers.wire.server import DROP, STALL, WireServer

pytestmark = pytest.mark.slow

MODEL = aw.MODEL


def provider(wire: WireServer, *, idle_timeout: float = 5.0) -> AnthropicProvider:
    return wire.track(
        AnthropicProvider(api_key="sk-ant-test", base_url=wire.url, idle_timeout=idle_timeout)
    )


async def test_text_turn_streams_text_usage_and_stop(wire: WireServer) -> None:
    wire.push(
        aw.stream(
            aw.message_start(25),
            aw.ping(),
            aw.text_block(0, ["Hel", "lo", "!"]),
            aw.message_end("end_turn", 7),
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert error is None
    assert events == [
        UsageEvent(25, 1),
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta("!"),
        UsageEvent(25, 7),
        StopEvent("end_turn"),
    ]
    sent = wire.received[0]
    assert sent.path == "/v1/messages"
    # SDK 2.x sends the key as a bearer token, older ones as x-api-key.
    sent_key = sent.headers.get("x-api-key") or sent.headers.get("authorization", "")[7:]
    assert sent_key == "sk-ant-test"
    body = sent.json()
    assert body["stream"] is True
    assert body["system"] == "Be brief."
    assert body["tools"][0]["name"] == "get_weather"
    assert body["tools"][0]["input_schema"]["properties"]["city"] == {"type": "string"}
    # The SDK's retries are off: the runner owns retry policy.
    assert sent.headers.get("x-stainless-retry-count") == "0"


async def test_parallel_tool_calls_get_stream_order_indices(wire: WireServer) -> None:
    wire.push(
        aw.stream(
            aw.message_start(),
            aw.text_block(0, ["Checking both."]),
            aw.tool_start(1, "toolu_A", "get_weather"),
            aw.tool_delta(1, '{"ci'),
            aw.tool_delta(1, 'ty": "Par'),
            aw.tool_delta(1, 'is"}'),
            aw.block_stop(1),
            aw.tool_start(2, "toolu_B", "get_weather"),
            aw.tool_delta(2, '{"city":'),
            aw.tool_delta(2, ' "Oslo"}'),
            aw.block_stop(2),
            aw.message_end("tool_use", 40),
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert error is None
    assert events == [
        UsageEvent(25, 1),
        TextDelta("Checking both."),
        ToolCallStart(0, "toolu_A", "get_weather"),
        ToolCallDelta(0, '{"ci'),
        ToolCallDelta(0, 'ty": "Par'),
        ToolCallDelta(0, 'is"}'),
        ToolCallEnd(0),
        ToolCallStart(1, "toolu_B", "get_weather"),
        ToolCallDelta(1, '{"city":'),
        ToolCallDelta(1, ' "Oslo"}'),
        ToolCallEnd(1),
        UsageEvent(25, 40),
        StopEvent("tool_use"),
    ]


async def test_tool_history_maps_to_tool_use_and_tool_result_blocks(wire: WireServer) -> None:
    wire.push(aw.stream(aw.message_start(), aw.text_block(0, ["Cloudy."]), aw.message_end()))
    _, error = await collect(provider(wire), tool_history_request(MODEL))
    assert error is None
    messages = wire.received[0].json()["messages"]
    assert messages[1]["content"][1] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert messages[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": "18C, cloudy",
        "is_error": False,
    }


async def test_connection_dropped_mid_stream_keeps_the_partial(wire: WireServer) -> None:
    wire.push(aw.stream(aw.message_start(), aw.text_block(0, ["Partial ", "answer"])[:2], DROP))
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == [UsageEvent(25, 1), TextDelta("Partial ")]
    assert isinstance(error, ConnectionDropped)
    assert error.retryable


async def test_clean_close_before_message_stop_is_a_drop(wire: WireServer) -> None:
    wire.push(aw.stream(aw.message_start(), aw.text_block(0, ["cut"])))
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == [UsageEvent(25, 1), TextDelta("cut")]
    assert isinstance(error, ConnectionDropped)


async def test_drop_after_the_stop_reason_still_completes(wire: WireServer) -> None:
    wire.push(
        aw.stream(
            aw.message_start(), aw.text_block(0, ["whole"]), aw.message_end("end_turn", 3)[0], DROP
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert error is None
    assert events == [
        UsageEvent(25, 1),
        TextDelta("whole"),
        UsageEvent(25, 3),
        StopEvent("end_turn"),
    ]


async def test_stall_is_stream_stalled(wire: WireServer) -> None:
    wire.push(aw.stream(aw.message_start(), aw.text_block(0, ["slow"])[:2], STALL))
    events, error = await collect(provider(wire, idle_timeout=0.3), simple_request(MODEL))
    assert events == [UsageEvent(25, 1), TextDelta("slow")]
    assert isinstance(error, StreamStalled)


@pytest.mark.parametrize(
    ("error_type", "expected"),
    [("overloaded_error", Overloaded), ("api_error", ServerError)],
)
async def test_in_stream_error_event(
    wire: WireServer, error_type: str, expected: type[Exception]
) -> None:
    wire.push(
        aw.stream(
            aw.message_start(),
            aw.text_block(0, ["Some"])[:2],
            aw.in_stream_error(error_type, "Overloaded"),
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == [UsageEvent(25, 1), TextDelta("Some")]
    assert type(error) is expected
    assert error is not None and error.retryable and error.retry_after is None


async def test_429_with_delta_seconds_retry_after(wire: WireServer) -> None:
    wire.push(aw.error_response(429, "rate_limit_error", "Slow down", {"retry-after": "7"}))
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == []
    assert isinstance(error, Throttled)
    assert error.retry_after == 7.0
    assert error.status == 429
    assert len(wire.received) == 1  # no SDK retry


async def test_429_with_http_date_retry_after_is_capped(wire: WireServer) -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    wire.push(aw.error_response(429, "rate_limit_error", "Slow down", {"retry-after": later}))
    _, error = await collect(provider(wire), simple_request(MODEL))
    assert isinstance(error, Throttled)
    assert error.retry_after == 60.0


async def test_529_overloaded_before_the_stream(wire: WireServer) -> None:
    wire.push(aw.error_response(529, "overloaded_error", "Overloaded"))
    _, error = await collect(provider(wire), simple_request(MODEL))
    assert isinstance(error, Overloaded)
    assert error.retry_after is None
    assert len(wire.received) == 1  # no SDK retry


async def test_permanent_400_is_invalid_request(wire: WireServer) -> None:
    wire.push(aw.error_response(400, "invalid_request_error", "max_tokens: must be positive"))
    _, error = await collect(provider(wire), simple_request(MODEL))
    assert type(error) is InvalidRequest
    assert error is not None and not error.retryable


async def test_401_is_authentication_failed(wire: WireServer) -> None:
    wire.push(aw.error_response(401, "authentication_error", "invalid x-api-key"))
    _, error = await collect(provider(wire), simple_request(MODEL))
    assert isinstance(error, AuthenticationFailed)


async def test_rejected_prefill_is_prefill_rejected(wire: WireServer) -> None:
    wire.push(
        aw.error_response(
            400,
            "invalid_request_error",
            "This model does not support assistant message prefill. "
            "The conversation must end with a user message.",
        )
    )
    _, error = await collect(
        provider(wire), simple_request("claude-opus-4-6", prefill="The weather is ")
    )
    assert isinstance(error, PrefillRejected)
    assert not error.retryable
    # The prefill went out as a trailing assistant message, trailing space removed
    # (the API rejects a prefill ending in whitespace).
    last = wire.received[0].json()["messages"][-1]
    assert last == {"role": "assistant", "content": [{"type": "text", "text": "The weather is"}]}


def test_prefill_capability_defaults_and_override() -> None:
    p = AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9")
    assert p.capabilities("claude-3-7-sonnet-20250219").assistant_prefill is True
    assert p.capabilities("claude-sonnet-4-5").assistant_prefill is True
    assert p.capabilities("claude-opus-4-6").assistant_prefill is False
    forced = AnthropicProvider(
        api_key="k", base_url="http://127.0.0.1:9", prefill={"claude-opus-4-6": True}
    )
    assert forced.capabilities("claude-opus-4-6").assistant_prefill is True
    assert forced.capabilities("claude-opus-4-7").assistant_prefill is False
