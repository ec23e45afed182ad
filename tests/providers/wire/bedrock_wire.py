"""Bedrock ConverseStream response bytes: event-stream frames with the real event shapes."""

from __future__ import annotations

import base64
import json

from tests.providers.wire.anthropic_wire import sign
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


# -- reasoning (extended thinking on Claude) ---------------------------------


def reasoning_text(index: int, fragment: str) -> bytes:
    return event(
        "contentBlockDelta",
        {"contentBlockIndex": index, "delta": {"reasoningContent": {"text": fragment}}},
    )


def reasoning_signature(index: int, thinking: str) -> bytes:
    return event(
        "contentBlockDelta",
        {"contentBlockIndex": index, "delta": {"reasoningContent": {"signature": sign(thinking)}}},
    )


def redacted_reasoning(index: int, data: bytes) -> bytes:
    # A blob travels base64-encoded in the event's JSON payload; botocore decodes it.
    encoded = base64.b64encode(data).decode()
    return event(
        "contentBlockDelta",
        {"contentBlockIndex": index, "delta": {"reasoningContent": {"redactedContent": encoded}}},
    )


def reasoning_block(index: int, chunks: list[str], *, signed: bool = True) -> list[bytes]:
    parts = [reasoning_text(index, c) for c in chunks]
    if signed:
        parts.append(reasoning_signature(index, "".join(chunks)))
    parts.append(block_stop(index))
    return parts


def metadata_with_cache(input_tokens: int, output_tokens: int, read: int, write: int) -> bytes:
    return event(
        "metadata",
        {
            "usage": {
                "inputTokens": input_tokens,
                "outputTokens": output_tokens,
                "totalTokens": input_tokens + output_tokens + read + write,
                "cacheReadInputTokens": read,
                "cacheWriteInputTokens": write,
            },
            "metrics": {"latencyMs": 321},
        },
    )
