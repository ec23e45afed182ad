"""Test providers and tools for the run loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from awaken_s3.messages import Message
from awaken_s3.runtime.tools import OUTCOME_UNKNOWN, Tool, ToolRegistry
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

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class TurnSpec:
    text: str
    #: (call id, tool name, input)
    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.calls else "end_turn"


def tool_turns(count: int, *, tool: str = "add") -> list[TurnSpec]:
    """``count`` tool-using turns (call ids ``call-<turn>``), then a final text turn."""
    turns = [
        TurnSpec(f"Step {t}: adding {t} and 1.", ((f"call-{t}", tool, {"a": t, "b": 1}),))
        for t in range(count)
    ]
    return [*turns, TurnSpec("All done, thank you.")]


Pause = Callable[[int, int], Awaitable[None]]


@dataclass
class TurnAwareProvider:
    """A deterministic model that behaves like a real one across workers and resumes.

    The script is chosen by the turn index (assistant messages already in the history), so
    any worker, in any process, asked for turn ``t`` streams turn ``t``. A trailing assistant
    message is a prefill prefix: the model continues after it, emitting only the rest.
    ``pause(turn, event_index)`` is awaited before each event (tests gate workers with it).
    """

    turns: Sequence[TurnSpec]
    delay: float = 0.0
    pause: Pause | None = None
    name: str = "turn-aware"
    requests: list[ModelRequest] = field(default_factory=list)

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=True)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        return self._events(request.messages)

    async def _events(self, messages: Sequence[Message]) -> AsyncIterator[StreamEvent]:
        prefix = ""
        history = list(messages)
        if history and history[-1].role == "assistant":
            prefix = history.pop().text
        turn = sum(1 for m in history if m.role == "assistant")
        spec = self.turns[turn]
        rest = spec.text[len(prefix) :] if spec.text.startswith(prefix) else spec.text
        events: list[StreamEvent] = [TextDelta(rest[i : i + 4]) for i in range(0, len(rest), 4)]
        for index, (call_id, name, args) in enumerate(spec.calls):
            raw = json.dumps(args)
            events.append(ToolCallStart(index, call_id, name))
            events.extend(ToolCallDelta(index, raw[i : i + 5]) for i in range(0, len(raw), 5))
            events.append(ToolCallEnd(index))
        events += [UsageEvent(7, len(rest)), StopEvent(spec.stop_reason)]
        for i, event in enumerate(events):
            if self.pause is not None:
                await self.pause(turn, i)
            await asyncio.sleep(self.delay)
            yield event


def expected_thread(prompt: str, turns: Sequence[TurnSpec], results: Sequence[str]) -> list[Any]:
    """The committed thread as (role, text, tool ids, result contents) rows."""
    from awaken_s3.messages import TextBlock, ToolResultBlock, ToolUseBlock

    rows: list[Any] = [Message.user(prompt)]
    for turn, spec in enumerate(turns):
        blocks: list[Any] = [TextBlock(text=spec.text)] if spec.text else []
        blocks += [ToolUseBlock(id=c, name=n, input=a) for c, n, a in spec.calls]
        rows.append(Message(role="assistant", content=tuple(blocks)))
        if spec.calls:
            rows.append(
                Message(
                    role="user",
                    content=tuple(
                        ToolResultBlock(
                            tool_use_id=c,
                            content=results[turn],
                            is_error=results[turn] == OUTCOME_UNKNOWN,
                        )
                        for c, _, _ in spec.calls
                    ),
                )
            )
    return rows


class Effects:
    """Counts side effects per tool call id (in memory, or appended to a shared file)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.calls: list[str] = []

    def record(self, call_key: str) -> None:
        if self.path is None:
            self.calls.append(call_key)
            return
        # O_APPEND writes of one short line are atomic across processes.
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(call_key + "\n")

    def all(self) -> list[str]:
        if self.path is None:
            return list(self.calls)
        try:
            with open(self.path, encoding="utf-8") as f:
                return f.read().split()
        except FileNotFoundError:
            return []


def adding_registry(effects: Effects, *, idempotent: bool = False) -> ToolRegistry:
    def add(a: int, b: int) -> str:
        effects.record(f"add:{a}")
        return str(a + b)

    return ToolRegistry([Tool("add", "Add two integers.", ADD_SCHEMA, add, idempotent=idempotent)])
