"""The demo's scripted model: it knows its answer and continues from any prefix.

A real model asked to continue a cut-off reply produces the rest of it; this one
does so deterministically, which is what lets the demo check the committed
thread byte for byte. It honours both continuation shapes:
a trailing assistant prefix (prefill) and an assistant prefix followed by a
"please continue" user message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from awaken_s3.messages import Message
from awaken_s3.streaming.events import StopEvent, StreamEvent, TextDelta, UsageEvent
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities

ANSWER = (
    "A stream checkpoint is a hint, not a record. While the model streams, the worker keeps "
    "the partial turn in one S3 object per run, written with conditional requests: the first "
    "put says If-None-Match, every later one says If-Match with the last ETag this writer saw. "
    "A worker that lost its lease finds its next put refused and stops, so it can never clobber "
    "the newer owner's partial. When the process dies mid-sentence, the next invocation loads "
    "the partial, plans R1, sends the saved text as a prefix and asks the model to go on. The "
    "whole turn, prefix and continuation together, is committed to DynamoDB exactly once, in "
    "one transaction conditioned on the lease epoch, and only then is the checkpoint deleted."
)


def _prefix_of(request: ModelRequest) -> str:
    """The assistant text the request asks the model to continue ("" for a fresh turn)."""
    messages: list[Message] = list(request.messages)
    for message in reversed(messages):
        if message.role == "assistant":
            # Only a trailing prefix (prefill) or one followed by a single
            # "continue" user message counts; older assistant turns do not.
            index = messages.index(message)
            if index >= len(messages) - 2:
                return message.text
            return ""
    return ""


@dataclass
class ContinuingModel:
    """Streams ``answer`` in ``chunk``-character deltas, ``delay`` seconds apart."""

    answer: str = ANSWER
    chunk: int = 6
    delay: float = 0.02
    prefill: bool = False
    name: str = "demo-model"
    prefixes_seen: list[str] = field(default_factory=list)

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=self.prefill)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        prefix = _prefix_of(request)
        self.prefixes_seen.append(prefix)
        start = len(prefix) if self.answer.startswith(prefix) else 0
        rest = self.answer[start:]
        for i in range(0, len(rest), self.chunk):
            await asyncio.sleep(self.delay)
            yield TextDelta(rest[i : i + self.chunk])
        yield UsageEvent(input_tokens=40 + len(prefix) // 4, output_tokens=len(rest) // 4)
        yield StopEvent("end_turn")
