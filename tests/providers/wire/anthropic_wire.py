"""Anthropic Messages API stream bytes: real event names and JSON shapes."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from tests.providers.wire.server import Part, Scripted
from tests.providers.wire.sse import SSE_HEADERS, sse

MODEL = "claude-opus-4-6"


def _ev(payload: dict[str, Any]) -> bytes:
    return sse(payload, event=payload["type"])


def message_start(input_tokens: int = 25) -> bytes:
    return _ev(
        {
            "type": "message_start",
            "message": {
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        }
    )


def ping() -> bytes:
    return _ev({"type": "ping"})


def text_block(index: int, chunks: list[str]) -> list[bytes]:
    return [
        _ev(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
        ),
        *[
            _ev(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": c},
                }
            )
            for c in chunks
        ],
        _ev({"type": "content_block_stop", "index": index}),
    ]


def tool_start(index: int, tool_id: str, name: str) -> bytes:
    return _ev(
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": {}},
        }
    )


def tool_delta(index: int, fragment: str) -> bytes:
    return _ev(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": fragment},
        }
    )


def block_stop(index: int) -> bytes:
    return _ev({"type": "content_block_stop", "index": index})


def message_end(stop_reason: str = "end_turn", output_tokens: int = 15) -> list[bytes]:
    return [
        _ev(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            }
        ),
        _ev({"type": "message_stop"}),
    ]


def in_stream_error(error_type: str, message: str) -> bytes:
    return _ev({"type": "error", "error": {"type": error_type, "message": message}})


def stream(*parts: Part | list[bytes]) -> Scripted:
    flat: list[Part] = []
    for part in parts:
        if isinstance(part, list):
            flat.extend(part)
        else:
            flat.append(part)
    return Scripted(200, {**SSE_HEADERS, "request-id": "req_011"}, flat)


def error_response(
    status: int, error_type: str, message: str, headers: dict[str, str] | None = None
) -> Scripted:
    body = json.dumps({"type": "error", "error": {"type": error_type, "message": message}})
    return Scripted(
        status,
        {"Content-Type": "application/json", "request-id": "req_012", **(headers or {})},
        [body.encode()],
    )


# -- extended thinking, server tools, refusals ---------------------------------


def sign(thinking: str) -> str:
    """The wire server's signature of a thinking text: any change to the text (or a
    signature copied onto other text) fails :mod:`tests.providers.wire.validation`."""
    digest = hashlib.sha256(b"wire-signing-key\0" + thinking.encode()).digest()
    return base64.b64encode(digest).decode()


def thinking_block(
    index: int, chunks: list[str], *, signed: bool = True, closed: bool = True
) -> list[bytes]:
    """A thinking block: start, thinking deltas, then (the API sends it last) the signature."""
    parts = [
        _ev(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
        ),
        *[
            _ev(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": c},
                }
            )
            for c in chunks
        ],
    ]
    if signed:
        parts.append(
            _ev(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": sign("".join(chunks))},
                }
            )
        )
    if closed:
        parts.append(block_stop(index))
    return parts


def redacted_thinking_start(index: int, data: str) -> bytes:
    return _ev(
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "redacted_thinking", "data": data},
        }
    )


def text_start(index: int) -> bytes:
    return _ev(
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        }
    )


def text_delta(index: int, chunk: str) -> bytes:
    return _ev(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": chunk},
        }
    )


def tool_start_with_input(index: int, tool_id: str, name: str, tool_input: dict[str, Any]) -> bytes:
    return _ev(
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input},
        }
    )


def server_tool_use_start(index: int, tool_id: str, name: str = "web_search") -> bytes:
    return _ev(
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "server_tool_use", "id": tool_id, "name": name, "input": {}},
        }
    )


SEARCH_RESULTS: list[dict[str, Any]] = [
    {
        "type": "web_search_result",
        "title": "Paris weather",
        "url": "https://weather.example/paris",
        "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2M",
        "page_age": "2 hours ago",
    }
]


def web_search_result_start(index: int, tool_use_id: str) -> bytes:
    return _ev(
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {
                "type": "web_search_tool_result",
                "tool_use_id": tool_use_id,
                "content": SEARCH_RESULTS,
            },
        }
    )
