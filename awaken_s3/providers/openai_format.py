"""OpenAI-compatible Chat Completions: request building and stream translation (pure).

Works for OpenAI and for compatible servers (vLLM, Ollama, LiteLLM ...). The
translator reads the SDK's chunk models by attribute.
"""

from __future__ import annotations

import json
from typing import Any, Final

from awaken_s3.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from awaken_s3.providers.stream_state import ToolCallIndexer
from awaken_s3.streaming.events import (
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.provider import ModelRequest

_FINISH_REASONS: Final = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


def normalise_finish_reason(reason: str | None) -> str:
    return _FINISH_REASONS.get(reason or "", "other")


def _user_messages(message: Message) -> list[dict[str, Any]]:
    # Tool results become ``tool`` messages, which must directly follow the
    # assistant message that made the calls; any user text comes after them.
    out: list[dict[str, Any]] = []
    text: list[str] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            content = f"Error: {block.content}" if block.is_error else block.content
            out.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
        elif isinstance(block, TextBlock):
            text.append(block.text)
        else:
            raise ValueError("a user message cannot carry a tool_use block")
    if text:
        out.append({"role": "user", "content": "".join(text)})
    return out


def _assistant_message(message: Message) -> dict[str, Any]:
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.input, ensure_ascii=False)},
        }
        for b in message.content
        if isinstance(b, ToolUseBlock)
    ]
    result: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        result["tool_calls"] = calls
    return result


def build_openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "user":
            out.extend(_user_messages(message))
        else:
            out.append(_assistant_message(message))
    return out


def build_openai_request(request: ModelRequest, *, max_tokens_param: str) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create`` (without ``stream``)."""
    params: dict[str, Any] = {
        "model": request.model,
        "messages": build_openai_messages(request),
        max_tokens_param: request.max_tokens,
        # Without it the stream carries no token counts at all.
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.input_schema),
                },
            }
            for tool in request.tools
        ]
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.stop_sequences:
        params["stop"] = list(request.stop_sequences)
    params.update(request.extra)
    return params


class OpenAIStreamTranslator:
    """Turns chat-completion chunks into common events.

    Chat Completions has no per-call end marker: every open call is closed when
    ``finish_reason`` arrives. The stop event is emitted by :meth:`finish`, after
    the usage chunk that follows ``finish_reason``.
    """

    __slots__ = ("_finish_reason", "_tools")

    def __init__(self) -> None:
        self._tools = ToolCallIndexer()
        self._finish_reason: str | None = None

    @property
    def stopped(self) -> bool:
        """``finish_reason`` arrived: the turn's content is complete."""
        return self._finish_reason is not None

    def feed(self, chunk: Any) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) != 0:
                continue  # n > 1 is not supported: one turn, one choice
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    out.append(TextDelta(delta.content))
                for call in delta.tool_calls or ():
                    out.extend(self._tool_fragment(call))
            if choice.finish_reason:
                self._finish_reason = choice.finish_reason
                out.extend(ToolCallEnd(i) for i in self._tools.end_all())
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            out.append(UsageEvent(usage.prompt_tokens or 0, usage.completion_tokens or 0))
        return out

    def _tool_fragment(self, call: Any) -> list[StreamEvent]:
        key = call.index
        function = call.function
        index = self._tools.index_of(key)
        out: list[StreamEvent] = []
        if index is None:
            index = self._tools.start(key)
            name = (function.name if function is not None else None) or ""
            out.append(ToolCallStart(index, call.id or f"call_{index}", name))
        if function is not None and function.arguments:
            out.append(ToolCallDelta(index, function.arguments))
        return out

    def finish(self) -> list[StreamEvent]:
        if self._finish_reason is None:
            return []
        return [StopEvent(normalise_finish_reason(self._finish_reason))]
