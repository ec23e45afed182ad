"""MCP servers as an agent's tools: :class:`MCPServer`.

``Agent(..., toolsets=[MCPServer(url, headers=..., prefix=..., include=...)])`` offers the
tools of a Model Context Protocol server to the agent's runs, next to its function tools. Each
MCP tool becomes an ordinary :class:`~awaken_s3.runtime.tools.Tool`: its ``inputSchema`` is the
tool's JSON schema (inputs are validated with ``jsonschema`` before anything is sent), and a
call goes through the same claim, ledger, ToolContext, timeout and parallel rules as a
function tool. The server speaks streamable HTTP (the deployed case) or stdio
(:meth:`MCPServer.stdio`, a local process for development), through the official ``mcp``
SDK (the ``mcp`` extra).

At most once: a tool whose annotations say ``idempotentHint`` or ``readOnlyHint`` is declared
idempotent, so a call whose worker died with its outcome unknown is sent again; any other is
not, and the model is told the outcome is unknown instead. Annotations are the server's
hints, so a server that marks a tool with side effects idempotent is trusted on that. Every
call carries the ToolContext's idempotency key in the request's ``_meta``
(:data:`IDEMPOTENCY_META_KEY`): the same for every attempt of one call, so a server that
deduplicates by it does the effect once even when the call is sent twice.

The tools are listed once per process (a Lambda container) and cached; a listing that fails
is not cached and is tried again on next use. A server that cannot be reached, answers with
an HTTP error or breaks the protocol makes the call an error result with a fixed sentence
(:data:`MCP_UNREACHABLE`, :data:`MCP_NO_ANSWER`, :data:`MCP_REFUSED`); the details go to the
log. The headers (an ``Authorization`` token) are sent to the server only: never logged,
never stored.

A connection is opened per call (and per listing) and closed after it: a Lambda container is
frozen between invocations, which a long-lived session would not survive.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from awaken_s3.agents import AgentDefinitionError
from awaken_s3.errors import AwakenError
from awaken_s3.runtime.tool_context import ToolContext
from awaken_s3.runtime.tools import TOOL_NAME_PATTERN, Tool, ToolError

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp import types as mcp_types

log = logging.getLogger("awaken_s3.mcp")

#: the key of the ToolContext's idempotency key in a ``tools/call`` request's ``_meta``
IDEMPOTENCY_META_KEY: Final = "awaken-s3/idempotency-key"
#: the result of a call that never reached the server (nothing was sent, so nothing ran)
MCP_UNREACHABLE: Final = "the MCP server of this tool could not be reached; the call was not made"
#: the result of a call that was sent but got no valid answer (it may have had its effect)
MCP_NO_ANSWER: Final = (
    "the MCP server of this tool did not answer the call; whether it had an effect is unknown"
)
#: the result of a call the server answered with a protocol error (an unknown tool, bad input)
MCP_REFUSED: Final = "the MCP server refused the call with a protocol error"
#: seconds a call may take unless the server says otherwise (the invocation's deadline also
#: bounds it: a call never outlives the time the invocation has left)
DEFAULT_CALL_TIMEOUT: Final = 60.0
#: how much later than the registry's bound a call's own timeout fires
BACKSTOP_SECONDS: Final = 1.0
#: seconds to connect and list the tools
DEFAULT_LIST_TIMEOUT: Final = 10.0

#: which of the server's tools to offer: their names (as the server names them), or a
#: predicate on that name; None offers them all
Include = Collection[str] | Callable[[str], bool] | None


class MCPUnavailable(AwakenError):
    """The server's tools could not be listed (the log has the cause)."""


def _label(url: str) -> str:
    """What the log names a server by: scheme, host and path, without credentials or query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _offered(include: Include, name: str) -> bool:
    if include is None:
        return True
    if callable(include):
        return bool(include(name))
    return name in include


def is_rerunnable(annotations: mcp_types.ToolAnnotations | None) -> bool:
    """Whether a call of this tool may be sent again after an unknown outcome (pure)."""
    if annotations is None:
        return False
    return bool(annotations.idempotentHint) or bool(annotations.readOnlyHint)


def render_call_result(result: mcp_types.CallToolResult) -> str:
    """The text the model reads for a tool's answer: its text blocks, else its structured
    content as JSON; any other block is named by its kind (its bytes are not sent)."""
    parts: list[str] = []
    for block in result.content:
        if block.type == "text":
            parts.append(block.text)
        elif block.type in ("image", "audio"):
            parts.append(f"[{block.type} {block.mimeType}]")
        elif block.type == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif block.type == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
    if not any(part.strip() for part in parts) and result.structuredContent is not None:
        return json.dumps(result.structuredContent)
    return "\n".join(parts)


class MCPServer:
    """An MCP server whose tools an agent offers (``Agent(toolsets=[...])``).

    ``headers`` go with every HTTP request (an ``Authorization`` token); ``prefix`` is put
    before each tool's name (``prefix="docs_"``: the server's ``search`` is the model's
    ``docs_search``), so two servers' tools cannot clash; ``include`` picks the tools offered
    (names as the server gives them, or a predicate). ``timeout``: seconds a call may take,
    ``list_timeout``: seconds to connect and list.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        prefix: str = "",
        include: Include = None,
        timeout: float = DEFAULT_CALL_TIMEOUT,
        list_timeout: float = DEFAULT_LIST_TIMEOUT,
    ) -> None:
        if urlsplit(url).scheme not in ("http", "https"):
            raise AgentDefinitionError("an MCP server's url must be http:// or https://")
        self._url = url
        self._headers = dict(headers or {})
        self._stdio: tuple[str, tuple[str, ...], dict[str, str] | None] | None = None
        self._setup(prefix, include, timeout, list_timeout)

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        prefix: str = "",
        include: Include = None,
        timeout: float = DEFAULT_CALL_TIMEOUT,
        list_timeout: float = DEFAULT_LIST_TIMEOUT,
    ) -> MCPServer:
        """A server run as a local process speaking over its stdin and stdout (development:
        each listing and each call starts the process anew)."""
        server = cls.__new__(cls)
        server._url = ""
        server._headers = {}
        server._stdio = (command, tuple(args), dict(env) if env is not None else None)
        server._setup(prefix, include, timeout, list_timeout)
        return server

    def _setup(self, prefix: str, include: Include, timeout: float, list_timeout: float) -> None:
        if prefix and not re.match(r"^[A-Za-z0-9_-]*$", prefix):
            raise AgentDefinitionError("an MCP prefix may hold only letters, digits, '_' and '-'")
        if timeout <= 0 or list_timeout <= 0:
            raise AgentDefinitionError("MCP timeouts must be positive")
        if include is not None and not callable(include) and isinstance(include, str):
            raise AgentDefinitionError("include takes a collection of tool names or a predicate")
        self.prefix, self.include = prefix, include
        self.timeout, self.list_timeout = timeout, list_timeout
        self._tools: tuple[Tool[..., Any], ...] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        # Never the headers: a repr lands in logs and tracebacks.
        where = f"stdio:{self._stdio[0]}" if self._stdio else _label(self._url)
        return f"MCPServer({where!r}, prefix={self.prefix!r})"

    @property
    def label(self) -> str:
        return repr(self)

    @property
    def listed(self) -> bool:
        return self._tools is not None

    # -- listing

    async def tools(self) -> tuple[Tool[..., Any], ...]:
        """The server's tools (as offered: filtered and prefixed), listed once and cached.
        Raises :class:`MCPUnavailable` when they cannot be listed (not cached)."""
        cached = self._tools
        if cached is not None:
            return cached
        try:
            async with asyncio.timeout(self.list_timeout):
                listed = await self._list()
        except Exception as exc:
            log.warning("%s: listing the tools failed", self.label, exc_info=_cause(exc))
            raise MCPUnavailable(f"{self.label}: its tools could not be listed") from None
        tools = tuple(t for t in (self._tool_for(item) for item in listed) if t is not None)
        with self._lock:
            if self._tools is None:
                self._tools = tools
            return self._tools

    def tools_blocking(self) -> tuple[Tool[..., Any], ...]:
        """:meth:`tools` from synchronous code (a thread of its own runs the listing, so this
        works whether or not the caller's thread runs an event loop)."""
        if self._tools is not None:
            return self._tools
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-list") as pool:
            return pool.submit(asyncio.run, self.tools()).result()

    async def _list(self) -> list[mcp_types.Tool]:
        found: list[mcp_types.Tool] = []
        async with self._session(self.list_timeout) as session:
            cursor: str | None = None
            while True:
                page = await session.list_tools(cursor)
                found.extend(page.tools)
                cursor = page.nextCursor
                if not cursor:
                    return found

    def _tool_for(self, listed: mcp_types.Tool) -> Tool[..., Any] | None:
        if not _offered(self.include, listed.name):
            return None
        name = f"{self.prefix}{listed.name}"
        if not re.match(TOOL_NAME_PATTERN, name):
            log.warning("%s: tool %r skipped: not a name every model accepts", self.label, name)
            return None
        remote = listed.name

        async def call(_awaken_mcp_context: ToolContext, **arguments: Any) -> str:
            return await self.call(remote, arguments, _awaken_mcp_context)

        call.__name__ = name
        schema = dict(listed.inputSchema or {"type": "object"})
        try:
            return Tool(
                name,
                listed.description or listed.title or "",
                schema,
                call,
                idempotent=is_rerunnable(listed.annotations),
                timeout=self.timeout,
            )
        except ValueError:
            log.warning("%s: tool %r skipped: its input schema is invalid", self.label, name)
            return None

    # -- calls

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        """Call the server's tool ``name`` (its own name, without the prefix): its answer's
        text, or :class:`ToolError` with a fixed sentence when the server fails."""
        # The registry cuts the call at the same bound (the tool's timeout, and the time the
        # invocation has left) and records it as timed out; this one, a little later, is a
        # backstop for a call made without the registry.
        limit = self.timeout
        left = ctx.seconds_left
        if left is not None:
            limit = min(limit, left)
        limit = max(0.001, limit) + BACKSTOP_SECONDS
        meta = {IDEMPOTENCY_META_KEY: ctx.idempotency_key}
        sent = False
        result: mcp_types.CallToolResult | None = None
        try:
            async with asyncio.timeout(limit), self._session(limit) as session:
                sent = True
                result = await session.call_tool(
                    name, dict(arguments), timedelta(seconds=limit), meta=meta
                )
        except Exception as exc:
            if result is None:
                cause = _cause(exc)
                ctx.logger.warning("%s: call of %s failed", self.label, name, exc_info=cause)
                raise ToolError(failure_sentence(cause, sent=sent)) from None
            # The answer came; only closing the connection failed.
            ctx.logger.info("%s: closing after the call failed", self.label, exc_info=_cause(exc))
        assert result is not None
        text = render_call_result(result)
        if result.isError:
            raise ToolError(text or "the MCP server reported an error")
        return text

    @asynccontextmanager
    async def _session(self, seconds: float) -> AsyncIterator[ClientSession]:
        from mcp import ClientSession

        read_timeout = timedelta(seconds=seconds)
        async with (
            self._streams(seconds) as (read, write),
            ClientSession(read, write, read_timeout_seconds=read_timeout) as session,
        ):
            await session.initialize()
            yield session

    @asynccontextmanager
    async def _streams(self, seconds: float) -> AsyncIterator[tuple[Any, Any]]:
        if self._stdio is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            command, args, env = self._stdio
            params = StdioServerParameters(command=command, args=list(args), env=env)
            async with stdio_client(params) as (read, write):
                yield read, write
            return
        import httpx
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = create_mcp_http_client(headers=self._headers, timeout=httpx.Timeout(seconds))
        async with client, streamable_http_client(self._url, http_client=client) as streams:
            yield streams[0], streams[1]


def failure_sentence(cause: BaseException, *, sent: bool) -> str:
    """What the model reads when a call failed with ``cause``: before the request was sent
    nothing ran; after it, only an error the server answered with says the tool did not run
    (the SDK reports a lost connection as an error too, "Connection closed")."""
    from mcp.shared.exceptions import McpError
    from mcp.types import CONNECTION_CLOSED

    if not sent:
        return MCP_UNREACHABLE
    # JSON-RPC errors the server sent have negative codes; the SDK makes up its own for a
    # closed connection (CONNECTION_CLOSED) and for a request that timed out (HTTP's 408).
    if (
        isinstance(cause, McpError)
        and cause.error.code < 0
        and cause.error.code != CONNECTION_CLOSED
    ):
        return MCP_REFUSED
    return MCP_NO_ANSWER


def _cause(exc: BaseException) -> BaseException:
    """The error to log: what a connection wrapper or a task group's exception group holds."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def load_toolsets(
    toolsets: Sequence[MCPServer],
) -> tuple[list[Tool[..., Any]], list[MCPServer]]:
    """The tools of every server that could be listed, and the servers that could not."""
    tools: list[Tool[..., Any]] = []
    down: list[MCPServer] = []
    for server in toolsets:
        try:
            tools.extend(await server.tools())
        except MCPUnavailable:
            down.append(server)
    return tools, down
