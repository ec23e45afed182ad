"""The dev server's scripted model and its one tool.

It answers every question with the demo's paragraph (:data:`awaken_s3.demo.model.ANSWER`), at
a pace a person can watch, and continues from any prefix a resume sends, as a real model
would. When a run offers the ``lookup`` tool, its first turn says what it will look up and
calls the tool (arguments streamed in pieces, so a kill can cut a call in half); the turn
after the tool's result gives the answer. That makes every recovery plan reachable by hand:
R1 (kill during text), R2 (kill after a complete call), R3 (kill inside the call's
arguments), R4 (kill before any text).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from awaken_s3.demo.model import ContinuingModel
from awaken_s3.messages import Message
from awaken_s3.runtime.tools import Tool, ToolRegistry
from awaken_s3.streaming.events import (
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities

TOOL_NAME = "lookup"
TOOL_INTRO = "Let me look up how S3 conditional writes fence a stale writer first. "
TOOL_ARGUMENTS = {"topic": "S3 conditional writes: If-None-Match and If-Match on PutObject"}
LOOKUP_RESULT = (
    "PutObject with If-None-Match: * creates an object only if none exists; with If-Match: "
    "<etag> it replaces the object only while its ETag is still that one. Either answers 412 "
    "Precondition Failed otherwise, so a writer holding an old ETag cannot overwrite a newer one."
)


def lookup(topic: str) -> str:
    """The dev tool: a fixed note about the topic (the same every time, so it is idempotent)."""
    return f"{topic}: {LOOKUP_RESULT}"


def dev_tools() -> ToolRegistry:
    return ToolRegistry(
        [
            Tool(
                TOOL_NAME,
                "Look up a topic in the awaken-s3 notes.",
                {
                    "type": "object",
                    "properties": {"topic": {"type": "string"}},
                    "required": ["topic"],
                    "additionalProperties": False,
                },
                lookup,
                idempotent=True,
            )
        ]
    )


def _has_tool_result(messages: list[Message]) -> bool:
    return any(block.type == "tool_result" for m in messages for block in m.content)


def _continued_prefix(messages: list[Message]) -> str:
    """The assistant text a resume asks to continue: a trailing assistant message (prefill)
    or one followed by a single "continue" user message; "" for a fresh turn."""
    if messages and messages[-1].role == "assistant":
        return messages[-1].text
    if (
        len(messages) >= 2
        and messages[-2].role == "assistant"
        and not _has_tool_result(messages[-1:])
    ):
        return messages[-2].text
    return ""


@dataclass
class DevModel:
    """Streams ``chunk`` characters every ``delay`` seconds."""

    chunk: int = 4
    delay: float = 0.08
    name: str = "dev-scripted"

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=False)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        messages = list(request.messages)
        offers_tool = any(spec.name == TOOL_NAME for spec in request.tools)
        if offers_tool and not _has_tool_result(messages):
            return self._tool_turn(_continued_prefix(messages))
        return ContinuingModel(chunk=self.chunk, delay=self.delay).stream(request)

    async def _tool_turn(self, prefix: str) -> AsyncIterator[StreamEvent]:
        start = len(prefix) if TOOL_INTRO.startswith(prefix) else 0
        rest = TOOL_INTRO[start:]
        for i in range(0, len(rest), self.chunk):
            await asyncio.sleep(self.delay)
            yield TextDelta(rest[i : i + self.chunk])
        yield ToolCallStart(index=1, id="toolu_dev_lookup", name=TOOL_NAME)
        arguments = json.dumps(TOOL_ARGUMENTS)
        for i in range(0, len(arguments), self.chunk * 2):
            await asyncio.sleep(self.delay)
            yield ToolCallDelta(index=1, arguments=arguments[i : i + self.chunk * 2])
        yield ToolCallEnd(index=1)
        yield UsageEvent(input_tokens=40, output_tokens=(len(rest) + len(arguments)) // 4)
        yield StopEvent("tool_use")
