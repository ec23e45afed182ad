"""The local stack a project's tests run their own app on (the ``awaken`` fixture).

:class:`Harness` starts, on a moto server (its :class:`~awaken_s3.testing.local_stack.LocalStack`):

* the bucket, table and FIFO queues the template declares (:mod:`awaken_s3.dev.resources`,
  which this repository's tests compare with template.yaml and the template ``awaken-s3 init``
  writes), fresh for every harness;
* the HTTP API's handler serving the app, in this process: each call becomes an API Gateway
  HTTP API event with a caller's JWT claims, as on Lambda;
* the real worker handler (:mod:`awaken_s3.testing.worker`: ``make_handler`` over the app,
  its tools observed) in killable local containers fed by the SQS event source, as Lambda's
  trigger feeds it, with the scripted model the test configures in place of a provider.

A test starts runs through the API and waits for them to end (:meth:`Harness.run`); it may
arm kill points first (:meth:`Harness.kill_at`): the worker stops at the point, the harness
SIGKILLs its container and the run resumes in a new one once the lease runs out, as after a
crash on Lambda. :class:`RunOutcome` holds what the caller sees (status, committed messages)
and what the test needs to judge the resume (the recovery plans used, each invocation's
outcome, the kills, every call of every tool: :mod:`awaken_s3.testing.worker_records` reads
them back, :mod:`awaken_s3.testing.kill_schedule` decides when to kill).

Nothing here ever reaches real AWS: the harness sets fake credentials and points every
service at moto while it runs, and puts the environment back when it stops.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from awaken_s3.testing.kill_schedule import Kill, KillSchedule
from awaken_s3.testing.kills import KillPoint
from awaken_s3.testing.local_stack import HarnessError, LocalStack
from awaken_s3.testing.model import ScriptedCall
from awaken_s3.testing.observe import CALLS_FILE
from awaken_s3.testing.worker import MODEL_FILE
from awaken_s3.testing.worker_records import (
    ToolRun,
    carries_run,
    invocation_outcomes,
    read_tool_runs,
    recovery_plans,
)

if TYPE_CHECKING:
    from awaken_s3.local.event_source import SqsEventSource

#: the caller every API call of the harness authenticates as (the JWT's sub)
CALLER: Final = "test-user"
#: seconds a run may take before the harness calls the test hung
HUNG: Final = 120.0
ENDED: Final = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True)
class ToolResult:
    """A tool result as the thread holds it (what the model was told)."""

    tool: str
    tool_use_id: str
    content: str
    is_error: bool

    def json(self) -> Any:
        return json.loads(self.content)


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    thread_id: str
    #: ``completed``, ``failed`` or ``cancelled``
    status: str
    #: the public error of a failed run (``{"code", "message"}``)
    error: dict[str, Any] | None
    #: the thread's committed messages, as ``GET /threads/{id}`` shows them
    messages: list[dict[str, Any]]
    #: the recovery plans the run's turns were resumed with, in order (none: never resumed)
    plans: list[str]
    #: each worker invocation's outcome, in order: ``ok``, ``error``, ``timeout``, ``killed``.
    #: How many ``ok`` follow a kill depends on timing, as on Lambda: an invocation that finds
    #: the dead worker's lease not yet run out hands its record back for later (``ok`` too),
    #: and a duplicate delivery of an ended run is acknowledged (``ok``). Judge a resume by
    #: :attr:`plans`, :attr:`kills` and the tools' runs, not by the count of invocations.
    invocations: list[str]
    kills: list[Kill] = field(default_factory=list)

    @property
    def answer(self) -> str:
        """The text of the last assistant message."""
        for message in reversed(self.messages):
            if message["role"] == "assistant":
                return "".join(b.get("text", "") for b in message["content"])
        return ""

    @property
    def tool_calls(self) -> list[tuple[str, dict[str, Any]]]:
        """Every tool call the committed turns made: (name, input), in the thread's order."""
        return [
            (block["name"], block["input"])
            for message in self.messages
            for block in message["content"]
            if block.get("type") == "tool_use"
        ]

    def tool_results(self, tool: str | None = None) -> list[ToolResult]:
        names = {
            block["id"]: block["name"]
            for message in self.messages
            for block in message["content"]
            if block.get("type") == "tool_use"
        }
        results = [
            ToolResult(
                names.get(block["tool_use_id"], "?"),
                block["tool_use_id"],
                str(block.get("content", "")),
                bool(block.get("is_error")),
            )
            for message in self.messages
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]
        return [r for r in results if tool is None or r.tool == tool]

    def tool_result(self, tool: str) -> ToolResult:
        """The last result of ``tool``'s calls."""
        results = self.tool_results(tool)
        if not results:
            raise AssertionError(f"the run has no result of tool {tool!r}: {self.tool_calls}")
        return results[-1]


@dataclass(frozen=True)
class StartedRun:
    thread_id: str
    run_id: str


class Harness:
    """See the module's docstring. ``app``: ``MODULE:ATTRIBUTE``, importable from ``root``;
    ``env``: the tools' own environment variables (their settings); ``lease_seconds``: how
    soon a killed worker's run resumes."""

    def __init__(
        self,
        app: str,
        *,
        endpoint_url: str,
        directory: Path,
        root: Path,
        env: Mapping[str, str] | None = None,
        lease_seconds: float = 3.0,
        workers: int = 1,
        region: str = "us-east-1",
    ) -> None:
        self.app_ref = app
        self.endpoint_url = endpoint_url
        self.directory = directory
        self.root = root.resolve()
        self.env = dict(env or {})
        self.lease_seconds = lease_seconds
        self.workers = workers
        self.region = region
        self.app: Any = None
        self.stack: Any = None
        self._local = LocalStack(
            app,
            endpoint_url=endpoint_url,
            directory=directory,
            root=self.root,
            env=self.env,
            lease_seconds=lease_seconds,
            workers=workers,
            region=region,
        )
        self._kill_schedule = KillSchedule(directory)

    # -- lifecycle

    def start(self) -> Harness:
        self._local.start()
        self.app, self.stack = self._local.app, self._local.stack
        return self

    def stop(self) -> None:
        """Stop the worker containers (each by its PID) and put the environment back."""
        self._local.stop()

    def __enter__(self) -> Harness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def _source(self) -> SqsEventSource:
        assert self._local.source is not None, "the harness is not started"
        return self._local.source

    # -- the HTTP API

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Call a route of the HTTP API as the harness's caller: (status, decoded body)."""
        from awaken_s3.dev import apigw
        from awaken_s3.local.lambda_context import in_process_context

        found = apigw.route_for(method, path.split("?", 1)[0])
        if found is None:
            raise HarnessError(f"the HTTP API has no route {method} {path}")
        route, parameters = found
        request = apigw.HttpRequest(
            method=method,
            target=path,
            headers=(("content-type", "application/json"),),
            body=b"" if body is None else json.dumps(body).encode("utf-8"),
        )
        claims = apigw.jwt_claims(
            CALLER, issuer="https://awaken-test.local/", audience="awaken-test", now=time.time()
        )
        event = apigw.http_api_event(request, route, parameters, claims=claims)
        context = in_process_context("api", region=self.region, timeout=29)
        answer = apigw.http_response(self._local.api(event, context))
        return answer.status, json.loads(answer.body) if answer.body else None

    def _ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.api(method, path, body)
        if status >= 300:
            raise AssertionError(f"{method} {path} answered {status}: {answer}")
        return answer

    def thread(self, thread_id: str) -> dict[str, Any]:
        thread: dict[str, Any] = self._ok("GET", f"/threads/{thread_id}")
        return thread

    # -- the model and the kills

    def script(
        self,
        *,
        calls: Sequence[ScriptedCall | tuple[str, Mapping[str, Any]]] | None = None,
        closing: str | None = None,
        prefill: bool = False,
        chunk: int = 4,
    ) -> None:
        """What the scripted model does from the next invocation on: the ``calls`` of a tool
        turn (None: every offered tool, arguments from its schema; ``[]``: none), the closing
        sentence of its answers, whether it takes a prefill, its delta size."""
        listed = None
        if calls is not None:
            listed = [
                {"name": c.name, "arguments": dict(c.arguments)}
                if isinstance(c, ScriptedCall)
                else {"name": c[0], "arguments": dict(c[1])}
                for c in calls
            ]
        script = {"calls": listed, "closing": closing, "prefill": prefill, "chunk": chunk}
        (self.directory / MODEL_FILE).write_text(json.dumps(script))

    def kill_at(self, *points: KillPoint) -> None:
        """Kill the worker of the next run started at each of ``points``, once each. Start
        one run at a time while kill points are armed."""
        self._kill_schedule.arm(points)

    def _stored(self, run_id: str) -> str:
        from awaken_s3.service.scoping import scoped_id

        return scoped_id(CALLER, run_id)

    def _kill_where_reached(self, run_id: str) -> None:
        stored = self._stored(run_id)
        self._kill_schedule.kill_where_reached(
            run_id,
            lambda: self._local.checkpoint(stored),
            lambda: self._source.kill_busy(lambda busy: carries_run(busy.records, stored)),
        )

    # -- runs

    def start_run(
        self,
        message: str,
        *,
        agent: str | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
        **fields: Any,
    ) -> StartedRun:
        """Create a thread (unless ``thread_id`` names one this harness made) and start a run
        on it through the HTTP API; ``fields``: other run fields (``tools``, ``system``, ...)."""
        if thread_id is None:
            thread_id = f"thread-{uuid.uuid4().hex[:12]}"
            self._ok("POST", "/threads", {"thread_id": thread_id})
        run_id = run_id or f"run-{uuid.uuid4().hex[:12]}"
        body = {"message": message, "run_id": run_id, **fields}
        if agent is not None:
            body["agent"] = agent
        status, answer = self.api("POST", f"/threads/{thread_id}/runs", body)
        if status != 202:
            raise AssertionError(f"the API refused the run: {status} {answer}")
        self._kill_schedule.started(run_id)
        return StartedRun(thread_id, run_id)

    def _busy_with(self, run_id: str) -> bool:
        stored = self._stored(run_id)
        return any(carries_run(busy.records, stored) for busy in self._source.busy())

    def wait(self, started: StartedRun, *, timeout: float = HUNG) -> RunOutcome:
        """Wait until the run has ended and no worker runs it; killing its worker at each
        armed point on the way."""
        deadline = time.monotonic() + timeout
        while True:
            self._kill_where_reached(started.run_id)
            run = self._ok("GET", f"/runs/{started.run_id}")
            if run["status"] in ENDED and not self._busy_with(started.run_id):
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"run {started.run_id} still {run['status']} after {timeout:g}s; the "
                    f"worker logs are in {self.directory / 'logs'}"
                )
            time.sleep(0.05)
        kills = self._kill_schedule.ended(started.run_id)
        stored = self._stored(started.run_id)
        return RunOutcome(
            run_id=started.run_id,
            thread_id=started.thread_id,
            status=run["status"],
            error=run.get("error"),
            messages=self.thread(started.thread_id)["messages"],
            plans=recovery_plans(self.directory / "logs", stored),
            invocations=invocation_outcomes(self._source.results(), stored),
            kills=kills,
        )

    def run(self, message: str, **kwargs: Any) -> RunOutcome:
        """:meth:`start_run`, then :meth:`wait`."""
        return self.wait(self.start_run(message, **kwargs))

    # -- what the workers did

    def tool_runs(self, tool: str | None = None) -> list[ToolRun]:
        """Every start of a tool's function (``tool``'s only, when given), in order."""
        runs = read_tool_runs(self.directory / CALLS_FILE)
        return [r for r in runs if tool is None or r.tool == tool]

    def sweep(self) -> Any:
        """One run of the sweeper's handler, in this process (as its schedule would)."""
        from awaken_s3.local.lambda_context import in_process_context
        from awaken_s3.service.sweeper_job import lambda_handler

        event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
        context: Any = in_process_context("sweeper", region=self.region, timeout=60)
        return lambda_handler(event, context)
