"""The soak's model: streams each run's scripted turn, continues any prefix in either form.

With prefill it continues right after the (whitespace-stripped) prefix; without, it is told
in a user message to continue and, like real models, often repeats the last words first.
Between deltas it yields to the event loop and sleeps a little, so a kill can land anywhere
in a stream. The first delta of every stream is appended to a shared log (run, turn, time)
for the resume-latency figure.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from awaken_s3.messages import Message
from awaken_s3.streaming.continuation import CONTINUE_INSTRUCTION
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
from tests.soak.script import RunScript, arguments_json, parse_prompt, script_for
from tests.streaming.echoes import echo_of

#: model names: the form of continuation the provider declares
PREFILL_MODEL = "soak-prefill"
CONTINUE_MODEL = "soak-continue"


@dataclass
class SoakModel:
    name: str = "soak"
    #: seconds between deltas: a turn streams for a few seconds, long enough for several
    #: coalesced checkpoints (one a second at most) and for kills to land mid-stream
    delay: float = field(default_factory=lambda: float(os.environ.get("SOAK_STREAM_DELAY", "0.01")))
    starts_log: str | None = field(default_factory=lambda: os.environ.get("SOAK_STARTS_LOG"))
    rng: random.Random = field(default_factory=random.Random)

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=model == PREFILL_MODEL)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self._events(request)

    @staticmethod
    def _split(messages: list[Message]) -> tuple[list[Message], str]:
        """The committed history and the prefix the request asks to continue."""
        if messages[-1].role == "assistant":
            return messages[:-1], messages[-1].text
        if messages[-1].role == "user" and messages[-1].text == CONTINUE_INSTRUCTION:
            return messages[:-2], messages[-2].text
        return messages, ""

    async def _events(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        history, prefix = self._split(list(request.messages))
        seed, prefill = parse_prompt(history[0].text)
        script: RunScript = script_for(seed, prefill)
        turn = sum(1 for m in history if m.role == "assistant")
        spec = script.turns[turn]
        if not spec.text.startswith(prefix):
            raise AssertionError(f"run {seed} turn {turn}: a kept prefix left the text")
        rest = spec.text[len(prefix) :]
        text = rest if prefill or not prefix else echo_of(prefix, self.rng) + rest
        events: list[StreamEvent] = []
        i = 0
        while i < len(text):
            step = self.rng.randint(3, 24)
            events.append(TextDelta(text[i : i + step]))
            i += step
        for index, call in enumerate(spec.calls):
            raw = arguments_json(call)
            events.append(ToolCallStart(index, call.id, call.name))
            j = 0
            while j < len(raw):
                step = self.rng.randint(2, 9)
                events.append(ToolCallDelta(index, raw[j : j + step]))
                j += step
            events.append(ToolCallEnd(index))
        events += [UsageEvent(len(prefix) // 4 + 50, len(text) // 4), StopEvent(spec.stop_reason)]
        for n, event in enumerate(events):
            if n == 0:
                self._started(seed, turn, len(prefix))
            await asyncio.sleep(self.delay)
            yield event

    def _started(self, seed: int, turn: int, prefix: int) -> None:
        if self.starts_log is None:
            return
        line = json.dumps({"seed": seed, "turn": turn, "prefix": prefix, "at": time.time()})
        # O_APPEND writes of one short line are atomic across processes.
        with open(self.starts_log, "a", encoding="utf-8") as log:
            log.write(line + "\n")
