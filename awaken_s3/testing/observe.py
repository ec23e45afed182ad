"""The app as a test's worker serves it: the user's own tools, each call recorded, and the
tool kill points where a test wants the worker killed.

:func:`observed_app` returns the same agents with every tool wrapped: the wrapper appends a
line to the harness's call log when the user's function starts and when it returns (the run,
the call, the idempotency key, the attempt, the arguments), and stops at an armed
:meth:`~awaken_s3.testing.kills.KillPoint.tool` point, before the function runs or after it
returned. The tool's name, schema, description, idempotency and timeout are the user's; the
registry validates and calls it exactly as the deployed worker does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from awaken_s3.agents import App
from awaken_s3.runtime.tool_context import ToolContext
from awaken_s3.runtime.tools import Tool, as_tool
from awaken_s3.testing.kills import KillPoint, claim_marker, read_plan

#: the harness's log of tool calls, one JSON object a line
CALLS_FILE: Final = "tool-calls.jsonl"
#: the parameter a wrapped tool takes its context by when the user's function takes none
CONTEXT_PARAM: Final = "awaken_testing_context"
#: how long a worker waits at a reached kill point for the harness to kill it
KILL_WAIT: Final = 120.0


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One JSON line, in one write: lines from concurrent calls and containers never mix."""
    data = (json.dumps(record, default=str) + "\n").encode("utf-8")
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, data)
    finally:
        os.close(descriptor)


def _stops(points: Sequence[KillPoint], tool: str, when: str) -> list[int]:
    return [
        index
        for index, point in enumerate(points)
        if point.kind == "tool" and point.tool_name == tool and point.when == when
    ]


class ToolObserver:
    """Records one tool's calls in ``directory`` and stops at its kill points."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _reached(self, tool: str, when: str) -> list[int]:
        """The points of ``tool`` at ``when`` that this call reaches first."""
        points = read_plan(self.directory)
        return [i for i in _stops(points, tool, when) if claim_marker(self.directory, i)]

    def wait_sync(self, tool: str, when: str) -> None:
        if self._reached(tool, when):
            time.sleep(KILL_WAIT)
            raise RuntimeError(f"kill point at tool {tool} ({when}) reached, nobody killed")

    async def wait(self, tool: str, when: str) -> None:
        if self._reached(tool, when):
            await asyncio.sleep(KILL_WAIT)
            raise RuntimeError(f"kill point at tool {tool} ({when}) reached, nobody killed")

    def record(self, event: str, tool: str, ctx: ToolContext, **fields: Any) -> None:
        append_line(
            self.directory / CALLS_FILE,
            {
                "event": event,
                "tool": tool,
                "run_id": ctx.run_id,
                "thread_id": ctx.thread_id,
                "tool_call_id": ctx.tool_call_id,
                "idempotency_key": ctx.idempotency_key,
                "attempt": ctx.attempt,
                "pid": os.getpid(),
                **fields,
            },
        )


def _arguments(kwargs: dict[str, Any], context_param: str) -> dict[str, Any]:
    from pydantic_core import to_jsonable_python

    return {
        name: to_jsonable_python(value, fallback=str)
        for name, value in kwargs.items()
        if name != context_param
    }


def observed_tool(tool: Tool[..., Any], observer: ToolObserver) -> Tool[..., Any]:
    """``tool``, its calls recorded and its kill points armed (its definition unchanged)."""
    original = tool.func
    own_param = tool.context_param
    param = own_param or CONTEXT_PARAM

    def split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], ToolContext]:
        ctx = kwargs[param]
        if own_param is None:
            kwargs = {k: v for k, v in kwargs.items() if k != param}
        return kwargs, ctx

    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(original):

        async def wrapper(**kwargs: Any) -> Any:
            call, ctx = split(kwargs)
            await observer.wait(tool.name, "before")
            observer.record("start", tool.name, ctx, arguments=_arguments(call, param))
            try:
                result = await original(**call)
            except BaseException as exc:
                observer.record("end", tool.name, ctx, error=type(exc).__name__)
                raise
            observer.record("end", tool.name, ctx, error=None)
            await observer.wait(tool.name, "after")
            return result

    else:

        def wrapper(**kwargs: Any) -> Any:
            call, ctx = split(kwargs)
            observer.wait_sync(tool.name, "before")
            observer.record("start", tool.name, ctx, arguments=_arguments(call, param))
            try:
                result = original(**call)
            except BaseException as exc:
                observer.record("end", tool.name, ctx, error=type(exc).__name__)
                raise
            observer.record("end", tool.name, ctx, error=None)
            observer.wait_sync(tool.name, "after")
            return result

    # The registry finds the context parameter in the signature, or (for a tool with an
    # explicit schema) in the function's annotations.
    wrapper.__annotations__ = {param: ToolContext}
    signature = tool.signature
    if signature is not None and own_param is None:
        signature = dataclasses.replace(signature, context_param=param)
    return dataclasses.replace(tool, func=wrapper, signature=signature)


def observed_app(app: App, directory: Path) -> App:
    """The same agents, every tool observed (see the module's docstring)."""
    observer = ToolObserver(directory)
    return App(
        dataclasses.replace(agent, tools=[observed_tool(as_tool(t), observer) for t in agent.tools])
        for agent in app
    )
