"""The run loop: lease, turns, commits, tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from awaken_s3._lazy import lazy_attributes

if TYPE_CHECKING:
    from awaken_s3.runtime.lease import LeaseKeeper
    from awaken_s3.runtime.loop import RunEnd, RunLoop, RunResult, pending_tool_calls
    from awaken_s3.runtime.tools import (
        OUTCOME_UNKNOWN,
        Tool,
        ToolError,
        ToolOutput,
        ToolRegistry,
        execute_tool_call,
    )

_LAZY = {
    "LeaseKeeper": "awaken_s3.runtime.lease",
    "OUTCOME_UNKNOWN": "awaken_s3.runtime.tools",
    "RunEnd": "awaken_s3.runtime.loop",
    "RunLoop": "awaken_s3.runtime.loop",
    "RunResult": "awaken_s3.runtime.loop",
    "Tool": "awaken_s3.runtime.tools",
    "ToolError": "awaken_s3.runtime.tools",
    "ToolOutput": "awaken_s3.runtime.tools",
    "ToolRegistry": "awaken_s3.runtime.tools",
    "execute_tool_call": "awaken_s3.runtime.tools",
    "pending_tool_calls": "awaken_s3.runtime.loop",
}

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "OUTCOME_UNKNOWN",
    "LeaseKeeper",
    "RunEnd",
    "RunLoop",
    "RunResult",
    "Tool",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "execute_tool_call",
    "pending_tool_calls",
]
