"""The dev stack's scripted model, which can call any app's tools, and the dev app.

:class:`ToolCallingModel` stands in for a provider when ``awaken-s3 dev`` runs without one: it
streams at a pace a person can watch and continues from any prefix a resume sends, as a real
model would. When a turn offers tools and the run has no tool result yet, it says which tools
it will use and calls every one of them in that turn (their arguments built from each tool's
input schema, streamed in pieces so a kill can cut a call in half); the turn after the results
gives its answer, quoting what the tools said. That makes every recovery plan reachable by
hand: R1 (kill during text), R2 (kill after the complete calls), R3 (kill inside a call's
arguments), R4 (kill before any text), with the user's own tools.

:func:`dev_app` is the app ``awaken-s3 dev`` serves when it is given none: a ``writer`` with no
tools and a ``researcher`` with a ``lookup`` tool.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from awaken_s3.agents import Agent, App
from awaken_s3.demo.model import ANSWER, ContinuingModel
from awaken_s3.messages import Message, ToolResultBlock
from awaken_s3.runtime.tools import tool
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

TOOL_NAME = "lookup"
LOOKUP_TOPIC = "S3 conditional writes: If-None-Match and If-Match on PutObject"
LOOKUP_RESULT = (
    "PutObject with If-None-Match: * creates an object only if none exists; with If-Match: "
    "<etag> it replaces the object only while its ETag is still that one. Either answers 412 "
    "Precondition Failed otherwise, so a writer holding an old ETag cannot overwrite a newer one."
)
#: characters of each tool result the answer quotes
QUOTED = 160


@tool(idempotent=True)
def lookup(topic: Annotated[str, Field(examples=[LOOKUP_TOPIC])]) -> str:
    """Look up a topic in the awaken-s3 notes.

    Args:
        topic: What to look up.
    """
    return f"{topic}: {LOOKUP_RESULT}"


def dev_app() -> App:
    return App(
        [
            Agent(
                "writer",
                description="Answers in one paragraph, with no tools.",
                overridable={"system", "max_turns"},
            ),
            Agent(
                "researcher",
                description="Looks the topic up first (the lookup tool), then answers.",
                tools=[lookup],
                overridable={"tools", "system", "max_turns"},
            ),
        ]
    )


def example_value(schema: Mapping[str, Any], defs: Mapping[str, Any], depth: int = 0) -> Any:
    """A value that fits ``schema``, as a model filling in a form would choose (pure): its
    example, its default, its first enum value, or a plain value of its type."""
    if "$ref" in schema and depth < 8:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return example_value(defs.get(name, {}), defs, depth + 1)
    for key in ("examples",):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema[key][0]
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


def tools_answered(history: Sequence[Message]) -> list[ToolResultBlock]:
    """The tool results since the caller's latest question (a user message with text)."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "user" and not _tool_results([message]):
            return _tool_results(history[index + 1 :])
    return _tool_results(history)


def intro(tools: Sequence[ToolSpec]) -> str:
    return f"Let me call {', '.join(spec.name for spec in tools)} first. "


def answer_for(history: Sequence[Message]) -> str:
    """The final answer: what the tools said (so a user sees their tools' results used),
    then the demo's paragraph. The same for the same thread, so a resume continues it."""
    names = {call.id: call.name for message in history for call in message.tool_uses}
    quotes = [
        f"{names.get(r.tool_use_id, 'a tool')} {'failed' if r.is_error else 'said'}: "
        f"{r.content[:QUOTED]}"
        for r in tools_answered(history)
    ]
    return ("\n".join(quotes) + "\n\n" if quotes else "") + ANSWER


@dataclass
class ToolCallingModel:
    """Streams ``chunk`` characters every ``delay`` seconds."""

    chunk: int = 4
    delay: float = 0.08
    name: str = "dev-scripted"

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=False)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        history, prefix = split_continuation(request.messages)
        if request.tools and not tools_answered(history):
            return self._tool_turn(request.tools, prefix)
        model = ContinuingModel(answer=answer_for(history), chunk=self.chunk, delay=self.delay)
        return model.stream(request)

    async def _tool_turn(
        self, tools: Sequence[ToolSpec], prefix: str
    ) -> AsyncIterator[StreamEvent]:
        text = intro(tools)
        rest = text[len(prefix) :] if text.startswith(prefix) else text
        for i in range(0, len(rest), self.chunk):
            await asyncio.sleep(self.delay)
            yield TextDelta(rest[i : i + self.chunk])
        sent = len(rest)
        for index, spec in enumerate(tools, start=1):
            yield ToolCallStart(index=index, id=f"toolu_dev_{index}_{spec.name}", name=spec.name)
            arguments = json.dumps(example_arguments(spec.input_schema))
            for i in range(0, len(arguments), self.chunk * 2):
                await asyncio.sleep(self.delay)
                yield ToolCallDelta(index=index, arguments=arguments[i : i + self.chunk * 2])
            yield ToolCallEnd(index=index)
            sent += len(arguments)
        yield UsageEvent(input_tokens=40, output_tokens=sent // 4)
        yield StopEvent("tool_use")


#: the name the dev stack used before it served apps
DevModel = ToolCallingModel
