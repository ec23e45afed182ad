"""The run loop: lease, turns, commits, tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from awaken_s3._lazy import lazy_exports

if TYPE_CHECKING:
    from awaken_s3.runtime.lease import LeaseKeeper as LeaseKeeper
    from awaken_s3.runtime.loop import RunEnd as RunEnd
    from awaken_s3.runtime.loop import RunLoop as RunLoop
    from awaken_s3.runtime.loop import RunResult as RunResult
    from awaken_s3.runtime.loop import pending_tool_calls as pending_tool_calls
    from awaken_s3.runtime.tools import OUTCOME_UNKNOWN as OUTCOME_UNKNOWN
    from awaken_s3.runtime.tools import Tool as Tool
    from awaken_s3.runtime.tools import ToolError as ToolError
    from awaken_s3.runtime.tools import ToolOutput as ToolOutput
    from awaken_s3.runtime.tools import ToolRegistry as ToolRegistry
    from awaken_s3.runtime.tools import execute_tool_call as execute_tool_call

__getattr__, __dir__, __all__ = lazy_exports(__name__)
