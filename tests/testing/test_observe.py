"""A tool as the test worker serves it: the same definition (name, schema, description,
idempotency), called by the registry exactly as before, every start and end recorded with the
call's context, whether or not the user's function takes the ToolContext itself."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from awaken_s3 import Agent, App, ToolContext, ToolError, tool
from awaken_s3.messages import ToolUseBlock
from awaken_s3.runtime.tool_context import tool_logger
from awaken_s3.runtime.tools import Tool
from awaken_s3.testing.harness import Harness
from awaken_s3.testing.observe import observed_app


@tool(idempotent=True)
def lookup(order_id: str) -> dict[str, str]:
    """Find an order."""
    if order_id == "none":
        raise ToolError("no such order")
    return {"order_id": order_id}


@tool
async def notify(text: str, ctx: ToolContext) -> str:
    """Tell someone."""
    return f"{text} ({ctx.attempt})"


def schema_tool(query: str) -> str:
    return f"found {query}"


EXPLICIT: Tool[..., Any] = Tool(
    "search",
    "Search.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    schema_tool,
)


def context(call_id: str) -> ToolContext:
    return ToolContext(
        run_id="r1",
        thread_id="t1",
        tool_call_id=call_id,
        idempotency_key=f"key-{call_id}",
        attempt=1,
        caller="me",
        logger=tool_logger("x"),
    )


def test_observed_tools_keep_their_definition_and_record_every_call(tmp_path: Path) -> None:
    app = App([Agent("desk", tools=[lookup, notify, EXPLICIT])])
    [agent] = list(observed_app(app, tmp_path))
    for original, observed in zip(app.default.tools, agent.tools, strict=True):
        assert isinstance(original, Tool) and isinstance(observed, Tool)
        assert observed.spec() == original.spec()
        assert observed.idempotent == original.idempotent
    registry = agent.registry

    async def call(name: str, arguments: dict[str, Any], call_id: str = "") -> tuple[str, bool]:
        block = ToolUseBlock(id=call_id or name, name=name, input=arguments)
        output = await registry.invoke(block, context(call_id or name))
        return output.content, output.is_error

    async def concurrently() -> list[tuple[str, bool]]:
        return list(
            await asyncio.gather(
                call("lookup", {"order_id": "A-17"}),
                call("notify", {"text": "hi"}),
                call("search", {"query": "q"}),
            )
        )

    results = asyncio.run(asyncio.wait_for(concurrently(), timeout=30))
    assert results == [('{"order_id": "A-17"}', False), ("hi (1)", False), ("found q", False)]
    failed = asyncio.run(call("lookup", {"order_id": "none"}, "lookup-2"))
    assert failed == ("tool 'lookup' failed: no such order", True)
    harness = Harness("unused:app", endpoint_url="", directory=tmp_path, root=tmp_path)
    runs = {(r.tool, r.tool_call_id): r for r in harness.tool_runs()}
    assert runs[("lookup", "lookup")].arguments == {"order_id": "A-17"}
    assert runs[("notify", "notify")].arguments == {"text": "hi"}  # the context is not one
    assert runs[("search", "search")].idempotency_key == "key-search"
    assert all(r.finished and r.attempt == 1 for r in runs.values())
    assert [r.error for r in harness.tool_runs("lookup")] == [None, "ToolError"]


def test_an_invalid_input_never_reaches_the_observed_function(tmp_path: Path) -> None:
    [agent] = list(observed_app(App([Agent("desk", tools=[lookup])]), tmp_path))
    block = ToolUseBlock(id="c1", name="lookup", input={"order": 3})
    output = asyncio.run(agent.registry.invoke(block, context("c1")))
    assert output.is_error and "order_id" in output.content
    assert not (tmp_path / "tool-calls.jsonl").exists()


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_call_passes_a_tool_point_an_earlier_worker_reached(tmp_path: Path, when: str) -> None:
    from awaken_s3.testing.kills import KillPoint, claim_marker, write_plan

    write_plan(tmp_path, [KillPoint.tool("lookup", when=when)])  # type: ignore[arg-type]
    assert claim_marker(tmp_path, 0)  # as the worker that reached it first did
    [agent] = list(observed_app(App([Agent("desk", tools=[lookup])]), tmp_path))
    block = ToolUseBlock(id="c1", name="lookup", input={"order_id": "A-17"})
    # A resumed worker passes the point it already reached: the call runs and returns.
    output = asyncio.run(asyncio.wait_for(agent.registry.invoke(block, context("c1")), 30))
    assert output.content == '{"order_id": "A-17"}'
