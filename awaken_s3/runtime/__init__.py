"""The run loop: lease, turns, commits, tools."""

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
