"""An MCP server that counts its side effects (``python -m tests.mcp.counting_server PORT
RECORDS``), built on the SDK's FastMCP and used only where a test must count calls on the
server's side; every other test runs against the reference server.

Each call appends a JSON line to RECORDS: the tool, its input, the idempotency key the
request's ``_meta`` carried and the Authorization header it came with. The first call of a
tool whose text is ``hang`` records itself and then never answers (the worker calling it is
killed there); a later one answers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

from awaken_s3.mcp import IDEMPOTENCY_META_KEY


def build(port: int, records: Path) -> FastMCP:
    server = FastMCP("counting", host="127.0.0.1", port=port, log_level="WARNING")

    async def record(tool: str, text: str, ctx: Context) -> str:  # type: ignore[type-arg]
        meta = ctx.request_context.meta
        key = getattr(meta, IDEMPOTENCY_META_KEY, None) if meta is not None else None
        if key is None and meta is not None:
            key = (meta.model_extra or {}).get(IDEMPOTENCY_META_KEY)
        request = ctx.request_context.request
        auth = request.headers.get("authorization") if request is not None else None
        line = {"tool": tool, "text": text, "key": key, "authorization": auth}
        first = not any(call["tool"] == tool for call in calls(records))
        with records.open("a") as out:
            out.write(json.dumps(line) + "\n")
        if text == "hang" and first:
            await anyio.sleep_forever()
        return f"{tool} did {text}"

    @server.tool(description="Send a note (a side effect: not safe to repeat).")
    async def send_note(text: str, ctx: Context) -> str:  # type: ignore[type-arg]
        return await record("send_note", text, ctx)

    @server.tool(
        description="Set a flag (safe to repeat).",
        annotations=ToolAnnotations(idempotentHint=True),
    )
    async def set_flag(text: str, ctx: Context) -> str:  # type: ignore[type-arg]
        return await record("set_flag", text, ctx)

    return server


def calls(records: Path) -> list[dict[str, str | None]]:
    if not records.exists():
        return []
    return [json.loads(line) for line in records.read_text().splitlines() if line]


if __name__ == "__main__":
    build(int(sys.argv[1]), Path(sys.argv[2])).run("streamable-http")
