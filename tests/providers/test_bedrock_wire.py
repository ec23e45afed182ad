"""BedrockConverseProvider with real aioboto3/botocore against local event-stream frames."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import aioboto3
import pytest

from awaken_s3.providers.bedrock import BedrockConverseProvider, client_config
from awaken_s3.streaming.errors import (
    AuthenticationFailed,
    ConnectionDropped,
    InvalidRequest,
    ModelNotFound,
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
from tests.providers.wire import bedrock_wire as bw
from tests.providers.wire.server import DROP, STALL, WireServer

pytestmark = pytest.mark.slow

MODEL = bw.MODEL


def provider(wire: WireServer, *, idle_timeout: float = 5.0) -> BedrockConverseProvider:
    return wire.track(
        BedrockConverseProvider(
            endpoint_url=wire.url, region_name="us-east-1", idle_timeout=idle_timeout
        )
    )


async def test_text_turn_streams_text_usage_and_stop(wire: WireServer) -> None:
    wire.push(
        bw.stream(
            bw.message_start(),
            bw.text(0, "Hel"),
            bw.text(0, "lo"),
            bw.block_stop(0),
            bw.message_stop("end_turn"),
            bw.metadata(20, 4),
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert error is None
    assert events == [TextDelta("Hel"), TextDelta("lo"), UsageEvent(20, 4), StopEvent("end_turn")]
    sent = wire.received[0]
    assert sent.path == f"/model/{MODEL}/converse-stream"
    assert sent.headers["authorization"].startswith("AWS4-HMAC-SHA256")
    body = sent.json()
    assert body["system"] == [{"text": "Be brief."}]
    assert body["inferenceConfig"] == {"maxTokens": 4096}
    assert body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["type"] == "object"


async def test_parallel_tool_calls_get_stream_order_indices(wire: WireServer) -> None:
    wire.push(
        bw.stream(
            bw.message_start(),
            bw.text(0, "Checking."),
            bw.block_stop(0),
            bw.tool_start(1, "tooluse_A", "get_weather"),
            bw.tool_input(1, '{"city"'),
            bw.tool_input(1, ': "Paris"}'),
            bw.block_stop(1),
            bw.tool_start(2, "tooluse_B", "get_weather"),
            bw.tool_input(2, '{"city": "Os'),
            bw.tool_input(2, 'lo"}'),
            bw.block_stop(2),
            bw.message_stop("tool_use"),
            bw.metadata(50, 30),
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert error is None
    assert events == [
        TextDelta("Checking."),
        ToolCallStart(0, "tooluse_A", "get_weather"),
        ToolCallDelta(0, '{"city"'),
        ToolCallDelta(0, ': "Paris"}'),
        ToolCallEnd(0),
        ToolCallStart(1, "tooluse_B", "get_weather"),
        ToolCallDelta(1, '{"city": "Os'),
        ToolCallDelta(1, 'lo"}'),
        ToolCallEnd(1),
        UsageEvent(50, 30),
        StopEvent("tool_use"),
    ]


async def test_tool_history_maps_to_tool_use_and_tool_result(wire: WireServer) -> None:
    wire.push(bw.stream(bw.message_start(), bw.text(0, "ok"), bw.message_stop("end_turn")))
    _, error = await collect(provider(wire), tool_history_request(MODEL))
    assert error is None
    messages = wire.received[0].json()["messages"]
    assert messages[1]["content"][1] == {
        "toolUse": {"toolUseId": "call_1", "name": "get_weather", "input": {"city": "Paris"}}
    }
    assert messages[2]["content"][0] == {
        "toolResult": {
            "toolUseId": "call_1",
            "content": [{"text": "18C, cloudy"}],
            "status": "success",
        }
    }


async def test_connection_dropped_mid_stream(wire: WireServer) -> None:
    wire.push(
        bw.stream(
            bw.message_start(),
            bw.tool_start(0, "tooluse_A", "get_weather"),
            bw.tool_input(0, '{"ci'),
            DROP,
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == [ToolCallStart(0, "tooluse_A", "get_weather"), ToolCallDelta(0, '{"ci')]
    assert isinstance(error, ConnectionDropped)


async def test_clean_close_before_message_stop_is_a_drop(wire: WireServer) -> None:
    wire.push(bw.stream(bw.message_start(), bw.text(0, "cut")))
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == [TextDelta("cut")]
    assert isinstance(error, ConnectionDropped)


async def test_stall_is_stream_stalled(wire: WireServer) -> None:
    wire.push(bw.stream(bw.message_start(), bw.text(0, "slow"), STALL))
    events, error = await collect(provider(wire, idle_timeout=0.3), simple_request(MODEL))
    assert events == [TextDelta("slow")]
    assert isinstance(error, StreamStalled)


@pytest.mark.parametrize(
    ("exception_type", "expected"),
    [
        ("throttlingException", Throttled),
        ("serviceUnavailableException", Overloaded),
        ("modelStreamErrorException", ServerError),
        ("internalServerException", ServerError),
        ("validationException", InvalidRequest),
    ],
)
async def test_in_stream_exception_events(
    wire: WireServer, exception_type: str, expected: type[Exception]
) -> None:
    wire.push(
        bw.stream(
            bw.message_start(), bw.text(0, "Some"), bw.stream_exception(exception_type, "it broke")
        )
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == [TextDelta("Some")]
    assert type(error) is expected
    assert error is not None and error.retry_after is None


@pytest.mark.parametrize("form", ["seconds", "http-date"])
async def test_429_with_retry_after_before_the_stream(wire: WireServer, form: str) -> None:
    value = (
        "4"
        if form == "seconds"
        else format_datetime(datetime.now(UTC) + timedelta(minutes=10), usegmt=True)
    )
    wire.push(
        bw.error_response(429, "ThrottlingException", "Too many requests", {"Retry-After": value})
    )
    events, error = await collect(provider(wire), simple_request(MODEL))
    assert events == []
    assert isinstance(error, Throttled)
    assert error.retry_after == (4.0 if form == "seconds" else 60.0)
    assert error.status == 429
    # botocore's retries are off: the runner owns retry policy.
    assert len(wire.received) == 1


async def test_503_before_stream_is_retryable_and_not_retried_by_botocore(
    wire: WireServer,
) -> None:
    wire.push(bw.error_response(503, "ServiceUnavailableException", "try later"))
    _, error = await collect(provider(wire), simple_request(MODEL))
    assert isinstance(error, Overloaded)
    assert error.retry_after is None
    assert len(wire.received) == 1


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (400, "ValidationException", InvalidRequest),
        (403, "AccessDeniedException", AuthenticationFailed),
        (404, "ResourceNotFoundException", ModelNotFound),
    ],
)
async def test_permanent_errors(
    wire: WireServer, status: int, code: str, expected: type[Exception]
) -> None:
    wire.push(bw.error_response(status, code, "no"))
    _, error = await collect(provider(wire), simple_request(MODEL))
    assert type(error) is expected
    assert error is not None and not error.retryable


async def test_rejected_prefill_is_prefill_rejected(wire: WireServer) -> None:
    wire.push(
        bw.error_response(
            400,
            "ValidationException",
            "This model does not support assistant message prefill. "
            "The conversation must end with a user message.",
        )
    )
    _, error = await collect(provider(wire), simple_request(MODEL, prefill="The weather "))
    assert isinstance(error, PrefillRejected)
    assert not error.retryable
    assert wire.received[0].json()["messages"][-1] == {
        "role": "assistant",
        "content": [{"text": "The weather"}],
    }


async def test_a_caller_owned_client_is_used(wire: WireServer) -> None:
    session = aioboto3.Session()
    config = client_config(idle_timeout=5.0, connect_timeout=5.0)
    async with session.client(
        "bedrock-runtime", region_name="us-east-1", endpoint_url=wire.url, config=config
    ) as client:
        p = BedrockConverseProvider(client=client)
        for _ in range(2):
            wire.push(bw.stream(bw.message_start(), bw.text(0, "hi"), bw.message_stop("end_turn")))
            events, error = await collect(p, simple_request(MODEL))
            assert error is None
            assert events == [TextDelta("hi"), StopEvent("end_turn")]


def test_prefill_defaults_for_bedrock_model_ids() -> None:
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
