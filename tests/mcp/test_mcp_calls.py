"""One MCP call or listing on its own: bounded by the invocation's deadline and by the
listing timeout against servers that never answer, and how an answer becomes the result."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from mcp import types
from mcp.shared.exceptions import McpError

from awaken_s3 import Agent, MCPServer, ToolError
from awaken_s3.agents import AgentDefinitionError
from awaken_s3.mcp import (
    MCP_NO_ANSWER,
    MCP_REFUSED,
    MCP_UNREACHABLE,
    MCPUnavailable,
    failure_sentence,
    render_call_result,
)
from awaken_s3.runtime.tool_context import ToolContext, tool_logger


def context(*, deadline: float | None = None, now: float = 0.0) -> ToolContext:
    return ToolContext(
        run_id="r1",
        thread_id="t1",
        tool_call_id="c1",
        idempotency_key="awaken-key",
        attempt=1,
        caller="alice",
        logger=tool_logger("t"),
        deadline=deadline,
        monotonic=lambda: now,
    )


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


async def test_a_call_never_outlives_the_invocation_s_deadline(silent_port: int) -> None:
    # The server's own timeout would wait an hour; the invocation has half a second left (the
    # call's backstop fires a second after the registry's bound, which this test bypasses).
    server = MCPServer(f"http://127.0.0.1:{silent_port}/mcp", timeout=3600)
    with pytest.raises(ToolError) as raised:
        await server.call("send_note", {"text": "x"}, context(deadline=100.5, now=100.0))
    # The handshake never got an answer, so the call itself was never sent.
    assert str(raised.value) == MCP_UNREACHABLE


def test_what_the_model_reads_depends_on_whether_the_request_was_sent() -> None:
    refused = McpError(types.ErrorData(code=types.INVALID_PARAMS, message="no such tool"))
    closed = McpError(types.ErrorData(code=types.CONNECTION_CLOSED, message="closed"))
    timed_out = McpError(types.ErrorData(code=408, message="timed out"))
    assert failure_sentence(OSError("refused"), sent=False) == MCP_UNREACHABLE
    assert failure_sentence(refused, sent=False) == MCP_UNREACHABLE
    assert failure_sentence(TimeoutError(), sent=True) == MCP_NO_ANSWER
    assert failure_sentence(closed, sent=True) == MCP_NO_ANSWER
    assert failure_sentence(timed_out, sent=True) == MCP_NO_ANSWER
    assert failure_sentence(refused, sent=True) == MCP_REFUSED


async def test_a_listing_that_gets_no_answer_is_given_up(silent_port: int) -> None:
    server = MCPServer(f"http://127.0.0.1:{silent_port}/mcp", list_timeout=0.5)
    with pytest.raises(MCPUnavailable):
        await server.tools()
    assert not server.listed


def test_an_answer_s_text_structured_content_and_other_blocks() -> None:
    text = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="first"),
            types.ImageContent(type="image", data="aGk=", mimeType="image/png"),
            types.TextContent(type="text", text="second"),
        ]
    )
    assert render_call_result(text) == "first\n[image image/png]\nsecond"
    structured = types.CallToolResult(content=[], structuredContent={"temperature": 21})
    assert render_call_result(structured) == '{"temperature": 21}'


def test_a_server_is_shown_without_its_headers_and_bad_options_are_refused() -> None:
    server = MCPServer("https://user:pw@mcp.example.com/mcp?k=1", headers={"X-Key": "s3cr3t"})
    assert repr(server) == "MCPServer('https://mcp.example.com/mcp', prefix='')"
    with pytest.raises(ValueError, match="http"):
        MCPServer("file:///etc/passwd")
    with pytest.raises(ValueError, match="prefix"):
        MCPServer("http://127.0.0.1:1/mcp", prefix="bad prefix")
    with pytest.raises(ValueError, match="include"):
        MCPServer("http://127.0.0.1:1/mcp", include="echo")
    with pytest.raises(AgentDefinitionError, match="MCPServer"):
        Agent("a", toolsets=["http://127.0.0.1:1/mcp"])  # type: ignore[list-item]
