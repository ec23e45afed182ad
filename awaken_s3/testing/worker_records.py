"""What the harness's workers did, read back from what they left: tool runs, plans, invocations.

Each worker container appends every start and end of a tool's function to the harness
directory's calls file (:mod:`awaken_s3.testing.observe`) and logs one ``run invocation
ended`` record per invocation, with the recovery plans it applied, to its log file; the event
source keeps each invocation's outcome. These pure readers turn that into what a test judges
a resume by. Run ids here are the stored ones (the caller's scope included).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awaken_s3.service.queue import run_id_of

if TYPE_CHECKING:
    from awaken_s3.local.invocations import InvocationResult
    from awaken_s3.local.sqs_events import QueueRecord


@dataclass(frozen=True)
class ToolRun:
    """One start of a tool's function, as the worker ran it."""

    tool: str
    run_id: str
    thread_id: str
    tool_call_id: str
    idempotency_key: str
    attempt: int
    arguments: dict[str, Any]
    #: the function returned or raised (False: its worker was killed while it ran)
    finished: bool
    #: the exception's type when it raised
    error: str | None
    pid: int


def read_tool_runs(calls_file: Path) -> list[ToolRun]:
    """Every start of a tool's function in ``calls_file``, in order, each matched with its end."""
    if not calls_file.exists():
        return []
    starts: list[dict[str, Any]] = []
    ends: dict[tuple[Any, ...], dict[str, Any]] = {}
    for line in calls_file.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        key = (entry["run_id"], entry["tool_call_id"], entry["attempt"], entry["pid"])
        if entry["event"] == "start":
            starts.append(entry)
        else:
            ends[key] = entry
    runs = []
    for entry in starts:
        end = ends.get((entry["run_id"], entry["tool_call_id"], entry["attempt"], entry["pid"]))
        runs.append(
            ToolRun(
                tool=entry["tool"],
                run_id=entry["run_id"],
                thread_id=entry["thread_id"],
                tool_call_id=entry["tool_call_id"],
                idempotency_key=entry["idempotency_key"],
                attempt=int(entry["attempt"]),
                arguments=entry.get("arguments") or {},
                finished=end is not None,
                error=end.get("error") if end is not None else None,
                pid=int(entry["pid"]),
            )
        )
    return runs


def recovery_plans(log_dir: Path, stored_run_id: str) -> list[str]:
    """The recovery plans the run's invocations applied, in the order they ended, from the
    workers' JSON logs (a line that is not JSON is some other output: skipped)."""
    ended = []
    for log in log_dir.glob("*.log"):
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(record, dict)
                and record.get("message") == "run invocation ended"
                and record.get("run_id") == stored_run_id
            ):
                ended.append(record)
    ended.sort(key=lambda r: str(r.get("timestamp")))
    return [plan for record in ended for plan in record.get("plans") or ()]


def carries_run(records: Iterable[QueueRecord], stored_run_id: str) -> bool:
    """Whether any of ``records`` (a batch, an invocation's) is the run's."""
    return any(run_id_of(r.body) == stored_run_id for r in records)


def invocation_outcomes(results: Iterable[InvocationResult], stored_run_id: str) -> list[str]:
    """The outcome of each invocation that carried the run, in order."""
    return [result.outcome for result in results if carries_run(result.records, stored_run_id)]
