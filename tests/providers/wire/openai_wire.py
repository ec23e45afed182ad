"""OpenAI Chat Completions stream bytes: ``data: {chunk}`` lines and ``data: [DONE]``."""

from __future__ import annotations

import json
from typing import Any

from tests.providers.wire.server import Part, Scripted
from tests.providers.wire.sse import SSE_HEADERS, sse

MODEL = "gpt-4.1"


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
) -> bytes:
    payload: dict[str, Any] = {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion.chunk",
        "created": 1741570283,
        "model": MODEL,
        "system_fingerprint": "fp_eb9dce56a8",
        "choices": (
            [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}]
            if choices
            else []
        ),
        "usage": usage,
    }
    return sse(payload)


def role() -> bytes:
    return chunk({"role": "assistant", "content": "", "refusal": None})


def text(fragment: str) -> bytes:
    return chunk({"content": fragment})


def tool_start(index: int, call_id: str, name: str) -> bytes:
    return chunk(
        {
            "tool_calls": [
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
            ]
        }
    )


def tool_args(index: int, fragment: str) -> bytes:
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})


def finish(reason: str) -> bytes:
    return chunk({}, finish_reason=reason)


def usage(prompt: int, completion: int) -> bytes:
    return chunk(
        choices=False,
        usage={
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    )


DONE = sse("[DONE]")


def stream(*parts: Part) -> Scripted:
    return Scripted(200, {**SSE_HEADERS, "x-request-id": "req_1"}, list(parts))


def in_stream_error(error_type: str, message: str, code: str | None = None) -> bytes:
    return sse({"error": {"message": message, "type": error_type, "param": None, "code": code}})


def error_response(
    status: int,
    error_type: str,
    message: str,
    *,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Scripted:
    body = json.dumps(
        {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    )
    return Scripted(
        status,
        {"Content-Type": "application/json", "x-request-id": "req_2", **(headers or {})},
        [body.encode()],
    )


# -- refusals, reasoning, and how compatible servers number tool calls ---------


def refusal(fragment: str) -> bytes:
    return chunk({"refusal": fragment})


def reasoning(fragment: str, *, field: str = "reasoning_content") -> bytes:
    """vLLM / DeepSeek (``reasoning_content``) or Ollama (``reasoning``) reasoning text."""
    return chunk({field: fragment})


def tool_fragment(
    *,
    index: int | None = None,
    call_id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
) -> bytes:
    """One ``delta.tool_calls`` entry with only the fields given: servers differ in which
    they send (Ollama: ``index`` 0 for every call; Gemini: no ``index``)."""
    call: dict[str, Any] = {"type": "function"}
    if index is not None:
        call["index"] = index
    if call_id is not None:
        call["id"] = call_id
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    call["function"] = function
    return chunk({"tool_calls": [call]})


def usage_with_cache(prompt: int, completion: int, cached: int) -> bytes:
    return chunk(
        choices=False,
        usage={
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    )
