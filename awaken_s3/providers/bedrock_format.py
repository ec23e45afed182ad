"""Bedrock ConverseStream: request building and stream translation (pure).

botocore parses the event-stream frames into dicts such as
``{"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Hi"}}}``;
the translator reads those.
"""

from __future__ import annotations

import base64
import binascii
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


def _block(block: AnyBlock) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        # Converse rejects blank text blocks (empty or only whitespace).
        return {"text": block.text} if block.text.strip() else None
    if isinstance(block, ToolUseBlock):
        return {"toolUse": {"toolUseId": block.id, "name": block.name, "input": block.input}}
    if isinstance(block, ToolResultBlock):
        return {
            "toolResult": {
                "toolUseId": block.tool_use_id,
                "content": [{"text": block.content}],
                "status": "error" if block.is_error else "success",
            }
        }
    if isinstance(block, ThinkingBlock):
        # Unsigned reasoning would be refused: it stays in the thread only.
        if not block.signed:
            return None
        text = {"text": block.thinking, "signature": block.signature}
        return {"reasoningContent": {"reasoningText": text}}
    if isinstance(block, RedactedThinkingBlock):
        try:
            data = base64.b64decode(block.data, validate=True)
        except (binascii.Error, ValueError):
            return None  # not a blob this adapter stored; Bedrock would refuse it anyway
        return {"reasoningContent": {"redactedContent": data}}
    return None  # another provider's server-tool block


def _message(message: Message) -> dict[str, Any]:
    content = [b for b in (_block(block) for block in message.content) if b is not None]
    return {"role": message.role, "content": content}


def build_converse_request(
    request: ModelRequest, *, defaults: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``client.converse_stream``.

    ``defaults`` are the provider's own extra fields (``additionalModelRequestFields``
    turning thinking on ...), which the request's ``extra`` overrides.
    """
    inference: dict[str, Any] = {"maxTokens": request.max_tokens}
    if request.temperature is not None:
        inference["temperature"] = request.temperature
    if request.stop_sequences:
        inference["stopSequences"] = list(request.stop_sequences)
    params: dict[str, Any] = {
        "modelId": request.model,
        "messages": without_empty_messages([_message(m) for m in rstrip_prefill(request.messages)]),
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
    params.update(request_fields(request, defaults or {}))
    return params


class ConverseStreamTranslator:
    """Turns parsed ConverseStream events into common events.

    A reasoning block has no ``contentBlockStart``: its first ``reasoningContent`` delta
    opens it, its ``contentBlockStop`` closes it.
    """

    __slots__ = ("_reasoning", "_stop_reason", "_tools")

    def __init__(self) -> None:
        self._tools = ToolCallIndexer()
        self._reasoning = ToolCallIndexer()
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
            if "reasoningContent" in delta:
                return self._reasoning_delta(
                    body.get("contentBlockIndex"), delta["reasoningContent"]
                )
            return []  # citations are not kept; the cited text is
        if "contentBlockStart" in event:
            body = event["contentBlockStart"]
            tool = body.get("start", {}).get("toolUse")
            if tool is None:
                return []
            index = self._tools.start(body.get("contentBlockIndex"))
            return [ToolCallStart(index, tool["toolUseId"], tool["name"])]
        if "contentBlockStop" in event:
            block = event["contentBlockStop"].get("contentBlockIndex")
            index = self._tools.end(block)
            if index is not None:
                return [ToolCallEnd(index)]
            reasoning = self._reasoning.end(block)
            return [ReasoningEnd(reasoning)] if reasoning is not None else []
        if "messageStop" in event:
            self._stop_reason = event["messageStop"].get("stopReason") or "other"
            closing: list[StreamEvent] = [ToolCallEnd(i) for i in self._tools.end_all()]
            closing.extend(ReasoningEnd(i) for i in self._reasoning.end_all())
            return closing
        if "metadata" in event:
            usage = event["metadata"].get("usage") or {}
            return [
                UsageEvent(
                    usage.get("inputTokens", 0),
                    usage.get("outputTokens", 0),
                    usage.get("cacheReadInputTokens", 0),
                    usage.get("cacheWriteInputTokens", 0),
                )
            ]
        return []

    def _reasoning_delta(self, block: Any, body: Mapping[str, Any]) -> list[StreamEvent]:
        index = self._reasoning.index_of(block)
        if index is None:
            index = self._reasoning.start(block)
        out: list[StreamEvent] = []
        redacted = body.get("redactedContent")
        if isinstance(redacted, bytes | bytearray) and redacted:
            # botocore decodes the blob; base64 keeps it a string in the thread and checkpoint.
            out.append(RedactedReasoning(index, base64.b64encode(redacted).decode("ascii")))
        text, signature = body.get("text") or "", body.get("signature") or ""
        if text or signature or not out:
            out.append(ReasoningDelta(index, text=text, signature=signature))
        return out

    def finish(self) -> list[StreamEvent]:
        if self._stop_reason is None:
            return []
        return [StopEvent(normalise_stop_reason(self._stop_reason))]
