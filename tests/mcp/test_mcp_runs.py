"""Agents with MCP servers, through the run loop with a scripted model: the reference server's
tools are listed, offered with their schemas, filtered and prefixed, called, and their answers
reach the model; a server that is down is an error result and the run still finishes."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from awaken_s3 import Agent, App, MCPServer, tool
from awaken_s3.agents import resolve_run_settings
from awaken_s3.local.ports import free_port
from awaken_s3.mcp import MCP_UNREACHABLE, MCPUnavailable
from awaken_s3.messages import ToolResultBlock
from awaken_s3.runtime.loop import RunEnd
from awaken_s3.runtime.tool_context import idempotency_key
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.threads import RunStatus, ThreadStore
from awaken_s3.threads.models import RunSettings
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import seed_run
from tests.mcp.conftest import serve_counting
from tests.mcp.counting_server import calls
from tests.runtime.scripts import TurnAwareProvider, TurnSpec
from tests.runtime.test_agent_runs import app_loop

DONE = TurnSpec("Done.")


async def created_settings(agent: Agent) -> RunSettings:
    """The settings the API stores for a run of ``agent`` (its servers listed at creation),
    planned as the API plans them: in a thread that runs no event loop."""
    return await asyncio.to_thread(resolve_run_settings, agent, {}, default_model="scripted-1")


async def run_agent(
    threads: ThreadStore,
    checkpoints: StreamCheckpointStore,
    clock: FakeClock,
    agent: Agent,
    turns: list[TurnSpec],
    *,
    settings: RunSettings | None = None,
) -> tuple[Any, list[ToolResultBlock], TurnAwareProvider]:
    await seed_run(threads, settings=settings or await created_settings(agent))
    provider = TurnAwareProvider(turns)
    result = await app_loop(threads, checkpoints, provider, App([agent]), clock).run("r1")
    results = [
        block
        for message in await threads.load_messages("t1")
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]
    return result, results, provider


async def test_no_listing_blocks_a_running_event_loop(counting: tuple[str, Path]) -> None:
    # The worker plans a run's provider (plan_run) inside its loop: the servers it has not
    # listed stay unlisted there rather than stall the loop; the claim lists them.
    url, records = counting
    agent = Agent("mcp", toolsets=[MCPServer(url)])
    assert resolve_run_settings(agent, {}, default_model="m").tools == ()
    assert not agent.toolsets[0].listed
    assert [s.name for s in await agent.tool_specs(["send_note"])] == ["send_note"]
    assert resolve_run_settings(agent, {}, default_model="m").tools == ("send_note", "set_flag")
    assert calls(records) == []


async def test_the_reference_server_s_tools_are_called_and_their_answers_reach_the_model(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock, everything: str
) -> None:
    server = MCPServer(everything, prefix="ev_", include={"echo", "get-sum"})
    agent = Agent("mcp", toolsets=[server])
    turns = [
        TurnSpec(
            "Echo and add.",
            (("c1", "ev_echo", {"message": "hello"}), ("c2", "ev_get-sum", {"a": 2, "b": 3})),
        ),
        DONE,
    ]
    result, results, provider = await run_agent(threads, checkpoints, clock, agent, turns)
    assert result.end == RunEnd.COMPLETED and result.tool_calls == 2
    assert [(r.tool_use_id, r.content, r.is_error) for r in results] == [
        ("c1", "Echo: hello", False),
        ("c2", "The sum of 2 and 3 is 5.", False),
    ]
    # The next turn's request carries the results to the model.
    last = provider.requests[-1].messages[-1].content
    assert [b.content for b in last if isinstance(b, ToolResultBlock)] == [
        "Echo: hello",
        "The sum of 2 and 3 is 5.",
    ]


async def test_the_model_is_offered_the_filtered_prefixed_tools_with_their_schemas(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock, everything: str
) -> None:
    @tool
    def note(text: str) -> str:
        """Keep a note."""
        return text

    server = MCPServer(everything, prefix="ev_", include=lambda name: name.startswith("get-s"))
    agent = Agent("mcp", tools=[note], toolsets=[server])
    settings = await created_settings(agent)
    assert settings.tools == ("note", "ev_get-structured-content", "ev_get-sum")

    _, _, provider = await run_agent(threads, checkpoints, clock, agent, [DONE], settings=settings)
    offered = {spec.name: spec for spec in provider.requests[0].tools}
    assert list(offered) == ["note", "ev_get-structured-content", "ev_get-sum"]
    schema = offered["ev_get-sum"].input_schema
    assert schema["properties"]["a"]["type"] == "number"
    assert sorted(schema["required"]) == ["a", "b"]
    assert offered["ev_get-sum"].description == "Returns the sum of two numbers"


async def test_input_that_breaks_the_tool_s_schema_is_refused_before_the_server(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock, everything: str
) -> None:
    agent = Agent("mcp", toolsets=[MCPServer(everything, include={"get-sum"})])
    turns = [TurnSpec("Adding.", (("c1", "get-sum", {"a": "two"}),)), DONE]
    result, results, _ = await run_agent(threads, checkpoints, clock, agent, turns)
    assert result.end == RunEnd.COMPLETED
    assert results[0].is_error and "invalid input for tool 'get-sum'" in results[0].content
    assert "a: 'two' is not of type 'number'" in results[0].content


async def test_annotations_decide_what_may_be_re_run(everything: str) -> None:
    server = MCPServer(everything)
    tools = {t.name: t for t in await server.tools()}
    # readOnlyHint and idempotentHint: re-run after an unknown outcome.
    assert tools["echo"].idempotent and tools["trigger-long-running-operation"].idempotent
    # idempotentHint alone (it writes a resource) is enough.
    assert tools["gzip-file-as-resource"].idempotent
    # Neither: at most once, the model is told the outcome is unknown.
    assert not tools["toggle-simulated-logging"].idempotent
    assert not tools["toggle-subscriber-updates"].idempotent


async def test_the_tools_are_listed_once_per_process(counting: tuple[str, Path]) -> None:
    url, _ = counting
    server = MCPServer(url)
    first = await server.tools()
    assert await server.tools() is first
    assert server.tools_blocking() is first


async def test_a_failed_listing_is_not_cached(tmp_path: Path) -> None:
    port = free_port()
    server = MCPServer(f"http://127.0.0.1:{port}/mcp")
    with pytest.raises(MCPUnavailable):
        await server.tools()
    assert not server.listed
    served = serve_counting(tmp_path / "calls.jsonl")
    try:
        # The same object at a now-running server: the next use lists again.
        server._url = served.url
        assert {t.name for t in await server.tools()} == {"send_note", "set_flag"}
    finally:
        served.stop()


async def test_the_idempotency_key_and_the_headers_reach_the_server_and_no_log(
    threads: ThreadStore,
    checkpoints: StreamCheckpointStore,
    clock: FakeClock,
    counting: tuple[str, Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, records = counting
    secret = "Bearer sekret-token-1234"
    server = MCPServer(url, headers={"Authorization": secret}, prefix="c_")
    agent = Agent("mcp", toolsets=[server])
    turns = [TurnSpec("Noting.", (("c1", "c_send_note", {"text": "hi"}),)), DONE]
    caplog.set_level(logging.DEBUG)
    result, results, _ = await run_agent(threads, checkpoints, clock, agent, turns)
    assert result.end == RunEnd.COMPLETED
    assert results[0].content == "send_note did hi"
    [call] = calls(records)
    assert call["key"] == idempotency_key("r1", "c1", 1)  # run.turn once the calling turn committed
    assert call["authorization"] == secret
    assert all(
        "sekret" not in r.getMessage() and "sekret" not in (r.exc_text or "")
        for r in caplog.records
    )
    assert "sekret" not in repr(server)
    stored = await threads.get_run("r1")
    assert "sekret" not in repr(stored) and "sekret" not in repr(await threads.load_messages("t1"))


async def test_a_server_that_went_down_is_an_error_result_and_the_run_finishes(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock, tmp_path: Path
) -> None:
    served = serve_counting(tmp_path / "calls.jsonl")
    agent = Agent("mcp", toolsets=[MCPServer(served.url)])
    settings = await created_settings(agent)  # listed while it was up
    served.stop()
    turns = [TurnSpec("Noting.", (("c1", "send_note", {"text": "hi"}),)), DONE]
    result, results, _ = await run_agent(
        threads, checkpoints, clock, agent, turns, settings=settings
    )
    assert result.end == RunEnd.COMPLETED
    assert (await threads.get_run("r1")).status == RunStatus.COMPLETED
    assert results[0].is_error
    assert results[0].content == f"tool 'send_note' failed: {MCP_UNREACHABLE}"


async def test_a_server_down_at_run_start_leaves_the_agent_its_function_tools(
    threads: ThreadStore,
    checkpoints: StreamCheckpointStore,
    clock: FakeClock,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    def note(text: str) -> str:
        """Keep a note."""
        return f"noted {text}"

    served = serve_counting(tmp_path / "calls.jsonl")
    settings = await created_settings(Agent("mcp", tools=[note], toolsets=[MCPServer(served.url)]))
    served.stop()
    assert settings.tools == ("note", "send_note", "set_flag")
    # A fresh worker container: its agent has not listed the server, which is down now.
    agent = Agent("mcp", tools=[note], toolsets=[MCPServer(served.url)])
    turns = [TurnSpec("Noting.", (("c1", "note", {"text": "x"}),)), DONE]
    caplog.set_level(logging.WARNING)
    result, results, provider = await run_agent(
        threads, checkpoints, clock, agent, turns, settings=settings
    )
    assert result.end == RunEnd.COMPLETED
    assert [spec.name for spec in provider.requests[0].tools] == ["note"]
    assert results[0].content == "noted x"
    assert any("their tools are not offered" in r.getMessage() for r in caplog.records)


async def test_a_server_down_at_creation_creates_the_run_with_the_function_tools() -> None:
    @tool
    def note(text: str) -> str:
        """Keep a note."""
        return text

    down = MCPServer(f"http://127.0.0.1:{free_port()}/mcp")
    assert (await created_settings(Agent("mcp", tools=[note], toolsets=[down]))).tools == ("note",)


async def test_an_http_error_is_an_unreachable_server(tmp_path: Path) -> None:
    import http.server
    import threading

    class Failing(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        server = MCPServer(f"http://127.0.0.1:{httpd.server_address[1]}/mcp")
        with pytest.raises(MCPUnavailable):
            await server.tools()
    finally:
        httpd.shutdown()
        thread.join()


async def test_the_reference_server_over_stdio(
    threads: ThreadStore,
    checkpoints: StreamCheckpointStore,
    clock: FakeClock,
    everything_script: Path,
) -> None:
    server = MCPServer.stdio("node", [str(everything_script), "stdio"], include={"echo"})
    agent = Agent("mcp", toolsets=[server])
    turns = [TurnSpec("Echo.", (("c1", "echo", {"message": "local"}),)), DONE]
    result, results, _ = await run_agent(threads, checkpoints, clock, agent, turns)
    assert result.end == RunEnd.COMPLETED
    assert [(r.content, r.is_error) for r in results] == [("Echo: local", False)]
