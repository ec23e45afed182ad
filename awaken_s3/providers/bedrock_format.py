"""Bedrock ConverseStream: request building and stream translation (pure).

botocore parses the event-stream frames into dicts such as
``{"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Hi"}}}``;
the translator reads those.
"""

from __future__ import annotations

from collections.abc import Mapping
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
        # Converse rejects blank text blocks.
        return {"text": block.text} if block.text else None
    if isinstance(block, ToolUseBlock):
        return {"toolUse": {"toolUseId": block.id, "name": block.name, "input": block.input}}
    return {
        "toolResult": {
            "toolUseId": block.tool_use_id,
            "content": [{"text": block.content}],
            "status": "error" if block.is_error else "success",
        }
    }


def _message(message: Message) -> dict[str, Any]:
    content = [b for b in (_block(block) for block in message.content) if b is not None]
    return {"role": message.role, "content": content}


def build_converse_request(request: ModelRequest) -> dict[str, Any]:
    """Keyword arguments for ``client.converse_stream``."""
    inference: dict[str, Any] = {"maxTokens": request.max_tokens}
    if request.temperature is not None:
        inference["temperature"] = request.temperature
    if request.stop_sequences:
        inference["stopSequences"] = list(request.stop_sequences)
    params: dict[str, Any] = {
        "modelId": request.model,
        "messages": [_message(m) for m in rstrip_prefill(request.messages)],
        "inferenceConfig": inference,
    }
    if request.system:
        params["system"] = [{"text": request.system}]
    if request.tools:
        params["toolConfig"] = {
            "tools": [
                {
                    "toolSpec": {
                        "name": tool.name,
                        "description": tool.description,
                        "inputSchema": {"json": dict(tool.input_schema)},
                    }
                }
                for tool in request.tools
            ]
        }
    params.update(request.extra)
    return params


class ConverseStreamTranslator:
    """Turns parsed ConverseStream events into common events."""

    __slots__ = ("_stop_reason", "_tools")

    def __init__(self) -> None:
        self._tools = ToolCallIndexer()
        self._stop_reason: str | None = None

    @property
    def stopped(self) -> bool:
        """``messageStop`` arrived: the turn's content is complete."""
        return self._stop_reason is not None

    def feed(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        if "contentBlockDelta" in event:
            body = event["contentBlockDelta"]
            delta = body.get("delta", {})
            if "text" in delta:
                return [TextDelta(delta["text"])] if delta["text"] else []
            if "toolUse" in delta:
                index = self._tools.index_of(body.get("contentBlockIndex"))
                fragment = delta["toolUse"].get("input", "")
                if index is None or not fragment:
                    return []
                return [ToolCallDelta(index, fragment)]
            return []  # reasoning content is not part of the committed turn
        if "contentBlockStart" in event:
            body = event["contentBlockStart"]
            tool = body.get("start", {}).get("toolUse")
            if tool is None:
                return []
            index = self._tools.start(body.get("contentBlockIndex"))
            return [ToolCallStart(index, tool["toolUseId"], tool["name"])]
        if "contentBlockStop" in event:
            index = self._tools.end(event["contentBlockStop"].get("contentBlockIndex"))
            return [ToolCallEnd(index)] if index is not None else []
        if "messageStop" in event:
            self._stop_reason = event["messageStop"].get("stopReason") or "other"
            return [ToolCallEnd(i) for i in self._tools.end_all()]
        if "metadata" in event:
            usage = event["metadata"].get("usage") or {}
            return [UsageEvent(usage.get("inputTokens", 0), usage.get("outputTokens", 0))]
        return []

    def finish(self) -> list[StreamEvent]:
        if self._stop_reason is None:
            return []
        return [StopEvent(normalise_stop_reason(self._stop_reason))]
