"""Anthropic Messages API: request building and stream translation (pure).

The translator reads the SDK's raw stream events by attribute (``type``,
``index``, ``delta`` ...), so it works on the SDK's models and on any object of
the same shape.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from awaken_s3.messages import (
    AnyBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from awaken_s3.providers.stream_state import (
    ToolCallIndexer,
    normalise_stop_reason,
    request_fields,
    rstrip_prefill,
    without_empty_messages,
)
from awaken_s3.streaming.events import (
    ProviderBlockDone,
    ReasoningDelta,
    ReasoningEnd,
    RedactedReasoning,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.provider import ModelRequest

PROVIDER = "anthropic"
_log = logging.getLogger("awaken_s3.providers")


def _block(block: AnyBlock) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        # The API rejects text blocks that are empty or only whitespace.
        return {"type": "text", "text": block.text} if block.text.strip() else None
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultBlock):
        return {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": block.content,
            "is_error": block.is_error,
        }
    if isinstance(block, ThinkingBlock):
        # Unsigned reasoning (another provider's) would be refused: it stays in the thread only.
        if not block.signed:
            return None
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": block.data}
    return dict(block.block) if block.provider == PROVIDER else None


def _message(message: Message) -> dict[str, Any]:
    content = [b for b in (_block(block) for block in message.content) if b is not None]
    return {"role": message.role, "content": content}


def build_anthropic_request(
    request: ModelRequest, *, defaults: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create`` (without ``stream``).

    ``defaults`` are the provider's own extra fields (``thinking`` ...), which the
    request's ``extra`` overrides.
    """
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": without_empty_messages([_message(m) for m in rstrip_prefill(request.messages)]),
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
    params.update(request_fields(request, defaults or {}))
    return params


def _tokens(usage: Any, name: str) -> int | None:
    value = getattr(usage, name, None)
    return value if isinstance(value, int) else None


def _raw(block: Any) -> dict[str, Any]:
    """A content block as the API sent it (SDK models keep fields they do not know)."""
    to_dict = getattr(block, "to_dict", None)
    if callable(to_dict):
        raw = to_dict(mode="json")
        if isinstance(raw, dict):
            return raw
    if isinstance(block, Mapping):
        return dict(block)
    return {k: v for k, v in vars(block).items() if not k.startswith("_")}


class _ServerBlock:
    """A server-tool block being streamed: its start block, then its input fragments."""

    __slots__ = ("fragments", "raw")

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.fragments: list[str] = []

    def done(self) -> dict[str, Any] | None:
        if not self.fragments:
            return self.raw
        try:
            parsed = json.loads("".join(self.fragments))
        except json.JSONDecodeError:
            _log.warning("dropping a server tool block whose input is not JSON")
            return None
        return {**self.raw, "input": parsed}


class AnthropicStreamTranslator:
    """Turns raw Messages stream events into common events, one event at a time.

    Content blocks are told apart by their stream index: tool calls, reasoning
    (``thinking``, ``redacted_thinking``) and any other block type, which is a server
    tool's (``server_tool_use``, ``web_search_tool_result`` ...) and is passed on whole,
    as received, when it closes.
    """

    __slots__ = (
        "_cache_read",
        "_cache_write",
        "_input_tokens",
        "_output_tokens",
        "_reasoning",
        "_server",
        "_start_input",
        "_stop_reason",
        "_streamed_input",
        "_tools",
        "finished",
    )

    def __init__(self) -> None:
        self._tools = ToolCallIndexer()
        self._reasoning = ToolCallIndexer()
        self._server: dict[int, _ServerBlock] = {}
        # A tool_use start block may already hold its whole input; it is used only when no
        # input fragments follow (otherwise the fragments are the input).
        self._start_input: dict[int, str] = {}
        self._streamed_input: set[int] = set()
        self._input_tokens = 0
        self._output_tokens = 0
        self._cache_read = 0
        self._cache_write = 0
        self._stop_reason: str | None = None
        #: ``message_stop`` arrived: the turn is complete.
        self.finished = False

    def _read_usage(self, usage: Any) -> None:
        if usage is None:
            return
        # Running totals, each reported on its own: cache reads and writes are billed
        # at other rates than ``input_tokens``, which does not include them.
        values = {
            "_input_tokens": _tokens(usage, "input_tokens"),
            "_cache_write": _tokens(usage, "cache_creation_input_tokens"),
            "_cache_read": _tokens(usage, "cache_read_input_tokens"),
            "_output_tokens": _tokens(usage, "output_tokens"),
        }
        for slot, value in values.items():
            if value is not None:
                setattr(self, slot, value)

    def _usage(self) -> UsageEvent:
        return UsageEvent(
            self._input_tokens, self._output_tokens, self._cache_read, self._cache_write
        )

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = getattr(event, "type", None)
        if kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        if kind == "content_block_start":
            return self._start(event.index, event.content_block)
        if kind == "content_block_stop":
            return self._stop(event.index)
        if kind == "message_start":
            # Reported at once so an attempt cut short still counts its prompt.
            self._read_usage(getattr(event.message, "usage", None))
            return [self._usage()]
        if kind == "message_delta":
            self._stop_reason = getattr(event.delta, "stop_reason", None)
            self._read_usage(getattr(event, "usage", None))
            return [self._usage()]
        if kind == "message_stop":
            return self.finish()
        return []

    def _delta(self, block: int, delta: Any) -> list[StreamEvent]:
        kind = delta.type
        if kind == "text_delta":
            return [TextDelta(delta.text)] if delta.text else []
        if kind == "input_json_delta":
            if not delta.partial_json:
                return []
            server = self._server.get(block)
            if server is not None:
                server.fragments.append(delta.partial_json)
                return []
            index = self._tools.index_of(block)
            if index is None:
                return []
            self._streamed_input.add(block)
            return [ToolCallDelta(index, delta.partial_json)]
        if kind in ("thinking_delta", "signature_delta"):
            index = self._reasoning.index_of(block)
            if index is None:
                return []
            if kind == "thinking_delta":
                return [ReasoningDelta(index, text=delta.thinking or "")]
            return [ReasoningDelta(index, signature=delta.signature or "")]
        # citations_delta: citations are not kept; the cited text is.
        return []

    def _start(self, block: int, content: Any) -> list[StreamEvent]:
        kind = content.type
        if kind == "tool_use":
            start_input = getattr(content, "input", None)
            if start_input:
                self._start_input[block] = json.dumps(start_input, ensure_ascii=False)
            return [ToolCallStart(self._tools.start(block), content.id, content.name)]
        if kind == "text":
            return [TextDelta(content.text)] if content.text else []
        if kind == "thinking":
            index = self._reasoning.start(block)
            return [
                ReasoningDelta(
                    index,
                    text=getattr(content, "thinking", None) or "",
                    signature=getattr(content, "signature", None) or "",
                )
            ]
        if kind == "redacted_thinking":
            return [RedactedReasoning(self._reasoning.start(block), content.data)]
        self._server[block] = _ServerBlock(_raw(content))
        return []

    def _stop(self, block: int) -> list[StreamEvent]:
        index = self._tools.end(block)
        if index is not None:
            start_input = self._start_input.pop(block, None)
            if start_input is not None and block not in self._streamed_input:
                return [ToolCallDelta(index, start_input), ToolCallEnd(index)]
            return [ToolCallEnd(index)]
        reasoning = self._reasoning.end(block)
        if reasoning is not None:
            return [ReasoningEnd(reasoning)]
        server = self._server.pop(block, None)
        if server is not None:
            raw = server.done()
            return [ProviderBlockDone(PROVIDER, raw)] if raw is not None else []
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
        closing: list[StreamEvent] = []
        for block in self._tools.open_keys():
            assert isinstance(block, int)  # keyed by content-block index
            closing.extend(self._stop(block))
        closing.extend(ReasoningEnd(i) for i in self._reasoning.end_all())
        closing.append(StopEvent(normalise_stop_reason(self._stop_reason)))
        return closing
