"""A deterministic provider that replays scripts, with faults.

Each call to :meth:`ScriptedProvider.stream` consumes the next script and
records the request it received. A script is a sequence of stream events and
fault steps:

* :class:`Drop` raises :class:`ConnectionDropped` (a connection drop after the
  events before it);
* :class:`Stall` waits until the consumer abandons the stream (an idle stall);
* :class:`Fail` raises any :class:`ProviderError` (5xx or throttling with or
  without a retry hint, a permanent error), before or during the stream;
* :class:`Hook` runs a callable when reached (tests advance fake clocks with it).

A script that ends without a fault just ends, like a clean stream.

A continuation request (a resume, in either form: the prefix as a trailing assistant message,
or followed by the "continue" user message) is answered the way a model answers it: when the
script's text begins with the prefix, the script is the whole turn and only what follows the
prefix is sent (every other event as scripted), so a test that is killed and run again with
the same script gets its whole text once. A script whose text does not begin with the prefix
is played as it is: it is the continuation itself.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from awaken_s3.errors import AwakenError
from awaken_s3.streaming.continuation import continued_prefix
from awaken_s3.streaming.errors import ConnectionDropped, ProviderError
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


@dataclass(frozen=True)
class Drop:
    message: str = "connection dropped mid-stream"


@dataclass(frozen=True)
class Stall:
    pass


@dataclass(frozen=True)
class Fail:
    error: ProviderError


@dataclass(frozen=True)
class Hook:
    #: run at that point of the stream; awaited when it returns an awaitable (a store write
    #: a test makes mid-stream), otherwise its return value is ignored
    action: Callable[[], object]


ScriptStep = StreamEvent | Drop | Stall | Fail | Hook


class ScriptsExhausted(AwakenError, AssertionError):
    """The code under test made more model calls than the test scripted."""


@dataclass
class ScriptedProvider:
    scripts: Sequence[Sequence[ScriptStep]]
    prefill: bool = True
    name: str = "scripted"
    #: seconds between events, for benchmarks (0: yield to the loop only)
    delay: float = 0.0
    #: pace events on a fixed schedule from the stream's start (event i is due at
    #: i * delay), like a model that keeps generating while the consumer is busy:
    #: a slow consumer then finds events waiting instead of slowing the producer
    paced: bool = False
    requests: list[ModelRequest] = field(default_factory=list)
    #: events handed out so far, over all calls
    events_sent: int = 0

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=self.prefill)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if len(self.requests) >= len(self.scripts):
            raise ScriptsExhausted(f"no script left for call {len(self.requests) + 1}")
        script = self.scripts[len(self.requests)]
        self.requests.append(request)
        prefix = continued_prefix(request.messages)
        return self._replay(after_prefix(script, prefix.text if prefix is not None else ""))

    async def _replay(self, script: Sequence[ScriptStep]) -> AsyncIterator[StreamEvent]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        sent = 0
        for step in script:
            if isinstance(step, Hook):
                outcome = step.action()
                if inspect.isawaitable(outcome):
                    await outcome
                continue
            if isinstance(step, Drop):
                raise ConnectionDropped(step.message, provider=self.name)
            if isinstance(step, Fail):
                raise step.error
            if isinstance(step, Stall):
                await asyncio.Event().wait()
                continue
            if self.paced:
                await asyncio.sleep(max(0.0, started + sent * self.delay - loop.time()))
            else:
                await asyncio.sleep(self.delay)
            sent += 1
            self.events_sent += 1
            yield step


def after_prefix(script: Sequence[ScriptStep], prefix: str) -> Sequence[ScriptStep]:
    """``script`` without the text ``prefix`` already holds, when its text begins with it."""
    if not prefix:
        return script
    text = "".join(step.text for step in script if isinstance(step, TextDelta))
    if not text.startswith(prefix):
        return script
    skip = len(prefix)
    kept: list[ScriptStep] = []
    for step in script:
        if isinstance(step, TextDelta) and skip:
            if len(step.text) <= skip:
                skip -= len(step.text)
                continue
            step = TextDelta(step.text[skip:])
            skip = 0
        kept.append(step)
    return kept


# -- script builders ------------------------------------------------------------


def text_deltas(text: str, *, chunk: int = 5) -> list[StreamEvent]:
    return [TextDelta(text[i : i + chunk]) for i in range(0, len(text), chunk)]


def tool_call(
    index: int,
    name: str,
    arguments: dict[str, Any] | str,
    *,
    call_id: str | None = None,
    chunk: int = 7,
    close: bool = True,
) -> list[StreamEvent]:
    """A tool call streamed in argument fragments; ``close=False`` never ends the block."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    events: list[StreamEvent] = [ToolCallStart(index, call_id or f"call_{index}", name)]
    events.extend(ToolCallDelta(index, raw[i : i + chunk]) for i in range(0, len(raw), chunk))
    if close:
        events.append(ToolCallEnd(index))
    return events


def interleave(*streams: Iterable[StreamEvent]) -> list[StreamEvent]:
    """Round-robin merge, as parallel tool calls arrive on the wire."""
    iterators = [iter(s) for s in streams]
    merged: list[StreamEvent] = []
    while iterators:
        alive = []
        for it in iterators:
            event = next(it, None)
            if event is not None:
                merged.append(event)
                alive.append(it)
        iterators = alive
    return merged


def finish(
    stop_reason: str = "end_turn", *, input_tokens: int = 10, output_tokens: int = 20
) -> list[StreamEvent]:
    return [UsageEvent(input_tokens, output_tokens), StopEvent(stop_reason)]


def text_turn(text: str, *, chunk: int = 5, stop_reason: str = "end_turn") -> list[StreamEvent]:
    return [*text_deltas(text, chunk=chunk), *finish(stop_reason)]
