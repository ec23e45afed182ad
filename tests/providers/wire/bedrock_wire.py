"""Bedrock ConverseStream response bytes: event-stream frames with the real event shapes."""

from __future__ import annotations

import json

from tests.providers.wire.eventstream import event, exception
from tests.providers.wire.server import Part, Scripted

MODEL = "us.anthropic.claude-opus-4-6-v1:0"


def message_start() -> bytes:
    return event("messageStart", {"role": "assistant"})


def text(index: int, fragment: str) -> bytes:
    return event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": fragment}})


def tool_start(index: int, tool_id: str, name: str) -> bytes:
    return event(
        "contentBlockStart",
        {"contentBlockIndex": index, "start": {"toolUse": {"toolUseId": tool_id, "name": name}}},
    )


def tool_input(index: int, fragment: str) -> bytes:
    return event(
        "contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": fragment}}}
    )


def block_stop(index: int) -> bytes:
    return event("contentBlockStop", {"contentBlockIndex": index})


def message_stop(reason: str) -> bytes:
    return event("messageStop", {"stopReason": reason})


def metadata(input_tokens: int, output_tokens: int) -> bytes:
    return event(
        "metadata",
        {
            "usage": {
                "inputTokens": input_tokens,
                "outputTokens": output_tokens,
                "totalTokens": input_tokens + output_tokens,
            },
            "metrics": {"latencyMs": 321},
        },
    )


def stream_exception(exception_type: str, message: str) -> bytes:
    return exception(exception_type, message)


def stream(*parts: Part) -> Scripted:
    return Scripted(
        200,
        {
            "Content-Type": "application/vnd.amazon.eventstream",
            "x-amzn-RequestId": "6f1a4c39-0000-4000-8000-000000000001",
        },
        list(parts),
    )


def error_response(
    status: int, error_type: str, message: str, headers: dict[str, str] | None = None
) -> Scripted:
    return Scripted(
        status,
        {
            "Content-Type": "application/json",
            "x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/",
            "x-amzn-RequestId": "6f1a4c39-0000-4000-8000-000000000002",
            **(headers or {}),
        },
        [json.dumps({"message": message}).encode()],
    )
