"""Test your own agent the way Lambda runs it, offline: a pytest plugin and its harness.

Installed with awaken-s3, the plugin (:mod:`awaken_s3.testing.plugin`, registered through the
``pytest11`` entry point) gives a project's tests the ``awaken`` fixture: the project's app
(``[tool.awaken-s3] app`` in its pyproject.toml) served on a moto server with the template's
resources, through the real API and worker handlers, the worker in killable local containers
fed by the SQS event source, and a scripted model that calls the app's tools::

    from awaken_s3.testing import KillPoint

    def test_a_ticket_is_never_opened_twice(awaken):
        awaken.kill_at(KillPoint.tool("open_ticket"))   # after it ran, before its result
        run = awaken.run("My order A-17 is late.")
        assert run.status == "completed" and run.plans == []
        assert len(awaken.tool_runs("open_ticket")) == 1

This package is for tests only: the Lambda artifacts leave it out, and nothing a deployed
handler imports lives here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from awaken_s3._lazy import lazy_attributes

if TYPE_CHECKING:
    from awaken_s3.testing.harness import Harness, RunOutcome, StartedRun, ToolResult
    from awaken_s3.testing.kill_schedule import Kill
    from awaken_s3.testing.kills import KillPoint
    from awaken_s3.testing.local_stack import HarnessError
    from awaken_s3.testing.model import ScriptedCall, ToolCallingModel
    from awaken_s3.testing.worker_records import ToolRun

_LAZY = {
    "Harness": "awaken_s3.testing.harness",
    "HarnessError": "awaken_s3.testing.local_stack",
    "Kill": "awaken_s3.testing.kill_schedule",
    "KillPoint": "awaken_s3.testing.kills",
    "RunOutcome": "awaken_s3.testing.harness",
    "ScriptedCall": "awaken_s3.testing.model",
    "StartedRun": "awaken_s3.testing.harness",
    "ToolCallingModel": "awaken_s3.testing.model",
    "ToolResult": "awaken_s3.testing.harness",
    "ToolRun": "awaken_s3.testing.worker_records",
}

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "Harness",
    "HarnessError",
    "Kill",
    "KillPoint",
    "RunOutcome",
    "ScriptedCall",
    "StartedRun",
    "ToolCallingModel",
    "ToolResult",
    "ToolRun",
]
