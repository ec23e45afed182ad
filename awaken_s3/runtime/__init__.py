"""The run loop: lease, turns, commits, tools."""

from awaken_s3.runtime.lease import LeaseKeeper
from awaken_s3.runtime.loop import RunLoop, RunResult
from awaken_s3.runtime.tools import (
    OUTCOME_UNKNOWN,
    Tool,
    ToolOutput,
    ToolRegistry,
    execute_tool_call,
)

__all__ = [
    "OUTCOME_UNKNOWN",
    "LeaseKeeper",
    "RunLoop",
    "RunResult",
    "Tool",
    "ToolOutput",
    "ToolRegistry",
    "execute_tool_call",
]
