"""A tool call's identity is (run, turn, call), whatever id the provider sends or omits.

OpenAI-compatible servers that send no tool-call ids get ``call_<index>`` ids from the adapter,
so the same id comes back every turn. Each call must still run with its own arguments and get
its own result, and each gets its own idempotency key. Driven through the real ``openai`` SDK
against a wire-level server on 127.0.0.1, on memory and on DynamoDB (moto).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from awaken_s3 import Agent, App, ToolContext, tool
from awaken_s3.messages import Message, ToolResultBlock
from awaken_s3.runtime.loop import RunEnd
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import SETTINGS, seed_run
from tests.providers.wire import openai_wire as ow
from tests.providers.wire.dialects import OpenAIDialect
from tests.providers.wire.server import Part, Scripted, WireServer
from tests.runtime.conftest import Backend
from tests.runtime.test_agent_runs import app_loop


@pytest.fixture
async def wire() -> AsyncIterator[WireServer]:
    server = WireServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _call_without_id(name: str, arguments: dict[str, Any]) -> list[Part]:
    """One tool call as a server that sends no ``id`` streams it (name first, then input)."""
    raw = json.dumps(arguments)
    return [
        ow.tool_fragment(index=0, name=name, arguments=""),
        ow.tool_fragment(index=0, arguments=raw[:5]),
        ow.tool_fragment(index=0, arguments=raw[5:]),
    ]


def tool_turn(name: str, arguments: dict[str, Any]) -> Scripted:
    return ow.stream(
        ow.role(),
        *_call_without_id(name, arguments),
        ow.finish("tool_calls"),
        ow.usage(10, 5),
        ow.DONE,
    )


def text_turn(text: str) -> Scripted:
    return ow.stream(ow.role(), ow.text(text), ow.finish("stop"), ow.usage(10, 5), ow.DONE)


async def drive(backend: Backend, wire: WireServer, agent: Agent) -> list[Message]:
    provider = OpenAIDialect().provider(wire)
    settings = dataclasses.replace(
        SETTINGS, model=ow.MODEL, agent=agent.name, tools=agent.tool_names
    )
    await seed_run(backend.threads, settings=settings)
    loop = app_loop(backend.threads, backend.checkpoints, provider, App([agent]), FakeClock())
    result = await loop.run("r1")
    assert result.end == RunEnd.COMPLETED, result
    return await backend.threads.load_messages("t1")


def results_of(messages: list[Message]) -> list[tuple[str, str, bool]]:
    return [
        (block.tool_use_id, block.content, block.is_error)
        for message in messages
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]


async def test_the_same_tool_with_the_same_id_in_two_turns_runs_twice_with_its_own_input(
    backend: Backend, wire: WireServer
) -> None:
    charged: list[int] = []
    keys: list[str] = []

    @tool
    def charge(amount: int, ctx: ToolContext) -> str:
        """Charge the customer's card (not safe to run twice)."""
        charged.append(amount)
        keys.append(ctx.idempotency_key)
        return f"charged {amount} EUR"

    wire.push(
        tool_turn("charge", {"amount": 10}),
        tool_turn("charge", {"amount": 99}),
        text_turn("Both charges are done."),
    )
    messages = await drive(backend, wire, Agent("billing", tools=[charge]))

    assert charged == [10, 99]
    assert results_of(messages) == [
        ("call_0", "charged 10 EUR", False),
        ("call_0", "charged 99 EUR", False),
    ]
    assert len(set(keys)) == 2
    # What the model was told after each turn is that turn's own result.
    sent = [json.loads(r.body)["messages"][-1] for r in wire.received[1:]]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("tool", "charged 10 EUR"),
        ("tool", "charged 99 EUR"),
    ]


async def test_two_tools_with_the_same_id_in_two_turns_each_run_once(
    backend: Backend, wire: WireServer
) -> None:
    runs: list[str] = []
    keys: list[str] = []

    @tool(idempotent=True)
    def lookup_order(order_id: str, ctx: ToolContext) -> dict[str, str]:
        """Find an order by its id."""
        runs.append("lookup_order")
        keys.append(ctx.idempotency_key)
        return {"order_id": order_id, "status": "lost"}

    @tool
    def open_ticket(summary: str, ctx: ToolContext) -> str:
        """Open a support ticket."""
        runs.append("open_ticket")
        keys.append(ctx.idempotency_key)
        return f"ticket opened: {summary}"

    wire.push(
        tool_turn("lookup_order", {"order_id": "A-17"}),
        tool_turn("open_ticket", {"summary": "A-17 lost"}),
        text_turn("I opened a ticket."),
    )
    messages = await drive(backend, wire, Agent("support", tools=[lookup_order, open_ticket]))

    assert runs == ["lookup_order", "open_ticket"]
    assert results_of(messages) == [
        ("call_0", '{"order_id": "A-17", "status": "lost"}', False),
        ("call_0", "ticket opened: A-17 lost", False),
    ]
    assert len(set(keys)) == 2
