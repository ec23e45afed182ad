"""Anthropic Messages API: request building and stream translation (pure).

The translator reads the SDK's raw stream events by attribute (``type``,
``index``, ``delta`` ...), so it works on the SDK's models and on any object of
the same shape.
"""

from __future__ import annotations

from typing import Any

from awaken_s3.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from awaken_s3.providers.stream_state import (
    ToolCallIndexer,
    normalise_stop_reason,
    rstrip_prefill,
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
from awaken_s3.streaming.provider import ModelRequest


def _block(block: TextBlock | ToolUseBlock | ToolResultBlock) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        # The API rejects empty text blocks.
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": block.content,
        "is_error": block.is_error,
    }


def _message(message: Message) -> dict[str, Any]:
    content = [b for b in (_block(block) for block in message.content) if b is not None]
    return {"role": message.role, "content": content}


def build_anthropic_request(request: ModelRequest) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create`` (without ``stream``)."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": [_message(m) for m in rstrip_prefill(request.messages)],
    }
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = [
            {
                "name": tool.name,
                "description": tool.description,
                "input_schema": dict(tool.input_schema),
            }
            for tool in request.tools
        ]
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.stop_sequences:
        params["stop_sequences"] = list(request.stop_sequences)
    params.update(request.extra)
    return params


def _tokens(usage: Any, name: str) -> int | None:
    value = getattr(usage, name, None)
    return value if isinstance(value, int) else None


class AnthropicStreamTranslator:
    """Turns raw Messages stream events into common events, one event at a time."""

    __slots__ = ("_input_tokens", "_output_tokens", "_stop_reason", "_tools", "finished")

    def __init__(self) -> None:
        self._tools = ToolCallIndexer()
        self._input_tokens = 0
        self._output_tokens = 0
        self._stop_reason: str | None = None
        #: ``message_stop`` arrived: the turn is complete.
        self.finished = False

    def _read_usage(self, usage: Any) -> None:
        if usage is None:
            return
        # Cached prompt tokens are billed input too; the API reports them apart.
        parts = [
            _tokens(usage, "input_tokens"),
            _tokens(usage, "cache_creation_input_tokens"),
            _tokens(usage, "cache_read_input_tokens"),
        ]
        if any(p is not None for p in parts):
            self._input_tokens = sum(p or 0 for p in parts)
        output = _tokens(usage, "output_tokens")
        if output is not None:
            self._output_tokens = output

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = getattr(event, "type", None)
        if kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                return [TextDelta(delta.text)] if delta.text else []
            if delta.type == "input_json_delta":
                index = self._tools.index_of(event.index)
                if index is None or not delta.partial_json:
                    return []
                return [ToolCallDelta(index, delta.partial_json)]
            # Thinking and signature deltas are not part of the committed turn.
            return []
        if kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                return [ToolCallStart(self._tools.start(event.index), block.id, block.name)]
            if block.type == "text" and block.text:
                return [TextDelta(block.text)]
            return []
        if kind == "content_block_stop":
            index = self._tools.end(event.index)
            return [ToolCallEnd(index)] if index is not None else []
        if kind == "message_start":
            # Reported at once so an attempt cut short still counts its prompt.
            self._read_usage(getattr(event.message, "usage", None))
            return [UsageEvent(self._input_tokens, self._output_tokens)]
        if kind == "message_delta":
            self._stop_reason = getattr(event.delta, "stop_reason", None)
            self._read_usage(getattr(event, "usage", None))
            return [UsageEvent(self._input_tokens, self._output_tokens)]
        if kind == "message_stop":
            return self.finish()
        return []

    @property
    def stopped(self) -> bool:
        """``message_delta`` carried the stop reason: the turn's content is complete."""
        return self._stop_reason is not None or self.finished

    def finish(self) -> list[StreamEvent]:
        """Close the message (at ``message_stop``, or when only it was lost)."""
        if self.finished:
            return []
        self.finished = True
        closing: list[StreamEvent] = [ToolCallEnd(i) for i in self._tools.end_all()]
        closing.append(StopEvent(normalise_stop_reason(self._stop_reason)))
        return closing
