"""A scripted model that can call any app's tools and continues from any prefix.

:class:`ToolCallingModel` stands in for a provider in a project's tests (``awaken_s3.testing``)
and in ``awaken-s3 dev`` without a provider. When a turn offers tools and the run has no tool
result yet, it says which tools it will use and calls them in that turn: the calls a test
scripted (:class:`ScriptedCall`), or every offered tool with arguments built from its input
schema (an example, a default, an enum's first value, or a plain value of its type). The turn
after the results answers, quoting what the tools said, then its closing sentence.

It is deterministic: the same thread gets the same turn, so a resumed turn can be checked
against the uninterrupted one. A resume sends the saved text as a prefix, as a trailing
assistant message (prefill) or followed by a "continue" user message; the model continues
exactly where that text stops, as a real model would. That makes every recovery plan
reachable with a user's own tools: R1 (killed during text), R2 (after the complete calls), R3
(inside a call's arguments), R4 (before any text).

Kill points (:mod:`awaken_s3.testing.kills`) stop the stream where a test wants its worker
killed: ``on_kill_point(i, state)`` is awaited when the stream reaches point ``i``, with what
it had sent by then.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from awaken_s3.messages import Message, ToolResultBlock
from awaken_s3.streaming.events import (
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities, ToolSpec
from awaken_s3.testing.kills import KillPoint, StreamState

DEFAULT_CLOSING = (
    "That is everything the tools told me. This closing sentence is the scripted model's, so "
    "a test can check that a resumed answer holds it exactly once."
)
#: characters of each tool result the answer quotes
QUOTED = 160


@dataclass(frozen=True)
class ScriptedCall:
    """A call the scripted model makes: the tool's name and its arguments."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


def example_value(schema: Mapping[str, Any], defs: Mapping[str, Any], depth: int = 0) -> Any:
    """A value that fits ``schema``, as a model filling in a form would choose (pure): its
    example, its default, its first enum value, or a plain value of its type."""
    if "$ref" in schema and depth < 8:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return example_value(defs.get(name, {}), defs, depth + 1)
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    if "default" in schema:
        return schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            usable = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
            return example_value(usable[0] if usable else options[0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        return example_arguments(schema, defs, depth + 1)
    if kind == "array":
        items = schema.get("items")
        return [example_value(items, defs, depth + 1)] if isinstance(items, dict) else []
    return {"integer": 1, "number": 1.0, "boolean": True, "null": None}.get(str(kind), "example")


def example_arguments(
    schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None, depth: int = 0
) -> dict[str, Any]:
    """Arguments for a tool's input schema: every required property, filled in."""
    defs = defs if defs is not None else schema.get("$defs", {})
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    if depth > 8:
        return {}
    return {
        name: example_value(properties.get(name, {}), defs, depth)
        for name in required
        if isinstance(properties.get(name, {}), dict)
    }


def _tool_results(messages: Sequence[Message]) -> list[ToolResultBlock]:
    return [b for m in messages for b in m.content if isinstance(b, ToolResultBlock)]


def split_continuation(messages: Sequence[Message]) -> tuple[list[Message], str]:
    """The thread the turn answers, and the assistant text a resume asks to continue: a
    trailing assistant message (prefill), or one followed by a single "continue" user message
    (no tool result in it); ``(messages, "")`` for a fresh turn."""
    history = list(messages)
    if history and history[-1].role == "assistant":
        return history[:-1], history[-1].text
    if (
        len(history) >= 2
        and history[-2].role == "assistant"
        and not history[-2].tool_uses
        and not _tool_results(history[-1:])
    ):
        return history[:-2], history[-2].text
    return history, ""


def _latest_question(history: Sequence[Message]) -> int:
    """The index of the caller's latest message (a user message that is not tool results)."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "user" and not _tool_results([message]):
            return index
    return -1


def tools_answered(history: Sequence[Message]) -> list[ToolResultBlock]:
    """The tool results since the caller's latest question."""
    return _tool_results(history[_latest_question(history) + 1 :])


def run_turn(history: Sequence[Message]) -> int:
    """Which model turn of the run this is: 1 + the assistant turns since the caller's
    latest question (pure)."""
    since = history[_latest_question(history) + 1 :]
    return 1 + sum(1 for message in since if message.role == "assistant")


def intro(names: Sequence[str]) -> str:
    return f"Let me call {', '.join(names)} first. "


def answer_for(history: Sequence[Message], closing: str = DEFAULT_CLOSING) -> str:
    """The final answer: what the tools said (so a user sees their tools' results used),
    then ``closing``. The same for the same thread, so a resume continues it."""
    names = {call.id: call.name for message in history for call in message.tool_uses}
    quotes = [
        f"{names.get(r.tool_use_id, 'a tool')} {'failed' if r.is_error else 'said'}: "
        f"{r.content[:QUOTED]}"
        for r in tools_answered(history)
    ]
    return ("\n".join(quotes) + "\n\n" if quotes else "") + closing


def _pieces(text: str, start: int, chunk: int, cuts: Sequence[int]) -> list[str]:
    """``text`` (which starts at offset ``start`` of the turn's text) in ``chunk``-sized
    pieces, also cut at every offset in ``cuts`` (pure)."""
    bounds = {start + i for i in range(0, len(text), max(1, chunk))}
    bounds |= {c for c in cuts if start < c < start + len(text)}
    edges = [*sorted(bounds), start + len(text)]
    return [text[a - start : b - start] for a, b in itertools.pairwise(edges)]


@dataclass
class ToolCallingModel:
    """Streams ``chunk`` characters every ``delay`` seconds (0: as fast as it can)."""

    chunk: int = 4
    delay: float = 0.0
    name: str = "awaken-scripted"
    #: the last sentence of every answer
    closing: str = DEFAULT_CLOSING
    #: the calls of a tool turn; None: every offered tool, with example arguments
    calls: Sequence[ScriptedCall] | None = None
    #: the model continues a trailing assistant message (else it is sent a "continue" ask)
    prefill: bool = False
    kill_points: Sequence[KillPoint] = ()
    #: awaited with a kill point's index, and what the stream had sent, when it reaches it
    on_kill_point: Callable[[int, StreamState], Awaitable[None]] | None = None

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=self.prefill)

    def planned_calls(self, tools: Sequence[ToolSpec]) -> list[ScriptedCall]:
        if self.calls is not None:
            return list(self.calls)
        return [ScriptedCall(spec.name, example_arguments(spec.input_schema)) for spec in tools]

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        history, prefix = split_continuation(request.messages)
        calls = self.planned_calls(request.tools) if request.tools else []
        # Call ids differ between the runs of a thread, and stay the same for a resumed turn.
        named = [(f"toolu_{len(history)}_{n}_{c.name}", c) for n, c in enumerate(calls, start=1)]
        turn = run_turn(history)
        if calls and not tools_answered(history):
            return self._play(turn, intro([c.name for c in calls]), prefix, named)
        return self._play(turn, answer_for(history, self.closing), prefix, [])

    def _points(self, kind: str, turn: int) -> list[tuple[int, KillPoint]]:
        return [
            (index, point)
            for index, point in enumerate(self.kill_points)
            if point.kind == kind and point.turn == turn
        ]

    async def _reach(self, index: int, state: StreamState) -> None:
        if self.on_kill_point is not None:
            await self.on_kill_point(index, state)

    async def _play(
        self, turn: int, text: str, prefix: str, calls: Sequence[tuple[str, ScriptedCall]]
    ) -> AsyncIterator[StreamEvent]:
        rest = text[len(prefix) :] if text.startswith(prefix) else text
        written = len(text) - len(rest)
        stops = {p.chars: i for i, p in self._points("text", turn) if written < p.chars}
        for piece in _pieces(rest, written, self.chunk, list(stops)):
            await asyncio.sleep(self.delay)
            yield TextDelta(piece)
            written += len(piece)
            if written in stops:
                await self._reach(stops.pop(written), StreamState(text=written))
        sent = len(rest)
        inside = self._points("tool_call", turn)
        for number, (call_id, call) in enumerate(calls, start=1):
            yield ToolCallStart(index=number, id=call_id, name=call.name)
            arguments = json.dumps(dict(call.arguments))
            half = max(1, len(arguments) // 2)
            # A point naming no tool is inside the turn's first call.
            here = [
                i
                for i, p in inside
                if p.tool_name == call.name or (p.tool_name, number) == (None, 1)
            ]
            offset = 0
            for piece in _pieces(arguments, 0, self.chunk * 2, [half] if here else []):
                await asyncio.sleep(self.delay)
                yield ToolCallDelta(index=number, arguments=piece)
                offset += len(piece)
                if offset == half:
                    for index in here:
                        await self._reach(index, StreamState(written, number, number - 1))
            yield ToolCallEnd(index=number)
            sent += len(arguments)
        if calls:
            for index, _ in self._points("tool_calls_done", turn):
                await self._reach(index, StreamState(written, len(calls), len(calls)))
        yield UsageEvent(input_tokens=40, output_tokens=max(1, sent // 4))
        yield StopEvent("tool_use" if calls else "end_turn")
