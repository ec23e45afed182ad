"""The local stack a project's tests run their own app on (the ``awaken`` fixture).

:class:`Harness` starts, on a moto server:

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
outcome, the kills, every call of every tool).

Nothing here ever reaches real AWS: the harness sets fake credentials and points every
service at moto while it runs, and puts the environment back when it stops.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from awaken_s3.errors import AwakenError
from awaken_s3.service.queue import run_id_of
from awaken_s3.testing.kills import KillPoint, checkpoint_ready, marker, reached, write_plan
from awaken_s3.testing.model import ScriptedCall
from awaken_s3.testing.observe import CALLS_FILE
from awaken_s3.testing.worker import MODEL_FILE

#: the caller every API call of the harness authenticates as (the JWT's sub)
CALLER: Final = "test-user"
WORKER_TIMEOUT: Final = 60
#: seconds a run may take before the harness calls the test hung
HUNG: Final = 120.0
SCRIPTED_MODEL: Final = "awaken-scripted"
ENDED: Final = frozenset({"completed", "failed", "cancelled"})
#: never a developer's real account: these go while the harness runs
_CREDENTIALS: Final = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


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
class Kill:
    point: KillPoint
    pids: tuple[int, ...]
    #: the run's checkpoint's text when its worker was killed
    partial_text: str


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


class HarnessError(AwakenError, RuntimeError):
    """The harness cannot run the app (the message says why)."""


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
        self._saved: dict[str, str | None] = {}
        self._source: Any = None
        self._thread: Any = None
        self._api: Any = None
        self._clients: dict[str, Any] = {}
        self._armed: list[KillPoint] = []
        #: kill points armed for the run they belong to, by index, not yet reached
        self._pending: dict[str, dict[int, KillPoint]] = {}
        self._kills: dict[str, list[Kill]] = {}

    # -- lifecycle

    def start(self) -> Harness:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        import boto3

        from awaken_s3.agents import AgentDefinitionError, load_app
        from awaken_s3.dev.resources import StackNames, create_stack, function_environment
        from awaken_s3.local.event_source import (
            EventSourceThread,
            FunctionConfig,
            SqsEventSource,
        )
        from awaken_s3.service.http import handler_for

        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "logs").mkdir(exist_ok=True)
        self._set_environment(
            {
                "AWS_ENDPOINT_URL": self.endpoint_url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": self.region,
                "AWS_REGION": self.region,
            },
            remove=_CREDENTIALS,
        )
        if str(self.root) not in sys.path:
            sys.path.insert(0, str(self.root))
        try:
            self.app = load_app(self.app_ref)
        except AgentDefinitionError as exc:
            raise HarnessError(f"app {self.app_ref}: {exc}") from exc
        names = StackNames.from_name(f"awaken-test-{uuid.uuid4().hex[:12]}")
        self.stack = create_stack(
            boto3.Session(),
            names,
            region=self.region,
            worker_timeout=WORKER_TIMEOUT,
            endpoint_url=self.endpoint_url,
        )
        function_env = {
            **function_environment(self.stack, lease_seconds=self.lease_seconds),
            # The scripted model serves every agent; any provider passes the API's checks.
            "AWAKEN_PROVIDER": "anthropic",
            "AWAKEN_MODEL": SCRIPTED_MODEL,
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL") or "INFO",
            "AWAKEN_TEST_DIR": str(self.directory),
            "AWAKEN_TEST_APP": self.app_ref,
            **self.env,
        }
        self._set_environment(function_env)
        self._api = handler_for(self.app)
        worker = FunctionConfig(
            handler="awaken_s3.testing.worker:lambda_handler",
            timeout=WORKER_TIMEOUT,
            name=f"{names.bucket}-worker",
            env=function_env,
            cwd=str(self.root),
        )
        self._source = SqsEventSource(
            self.stack.queue_url,
            worker,
            endpoint_url=self.endpoint_url,
            region=self.region,
            max_concurrency=self.workers,
            poll_interval=0.1,
            log_dir=self.directory / "logs",
            stop_grace=2,
        )
        self._thread = EventSourceThread(self._source)
        self._thread.start()

    def stop(self) -> None:
        """Stop the worker containers (each by its PID) and put the environment back."""
        if self._thread is not None:
            self._thread.stop(grace=2)
            self._thread = None
        for name, value in reversed(list(self._saved.items())):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved.clear()

    def __enter__(self) -> Harness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _set_environment(self, values: Mapping[str, str], remove: Sequence[str] = ()) -> None:
        for name in [*values, *remove]:
            self._saved.setdefault(name, os.environ.get(name))
        for name in remove:
            os.environ.pop(name, None)
        os.environ.update(values)

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            import boto3

            session: Any = boto3.Session()
            self._clients[service] = session.client(
                service, region_name=self.region, endpoint_url=self.endpoint_url
            )
        return self._clients[service]

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
        answer = apigw.http_response(self._api(event, context))
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
        for index in range(len(self._armed)):
            marker(self.directory, index).unlink(missing_ok=True)
        self._armed = list(points)
        write_plan(self.directory, self._armed)

    def _stored(self, run_id: str) -> str:
        from awaken_s3.service.scoping import scoped_id

        return scoped_id(CALLER, run_id)

    def _handle_kills(self, run_id: str) -> None:
        from awaken_s3.dev.resources import read_checkpoint

        pending = self._pending.get(run_id, {})
        stored = self._stored(run_id)
        for index, point in list(pending.items()):
            hit, state = reached(self.directory, index)
            if not hit:
                continue
            found = read_checkpoint(self._client("s3"), self.stack.names.bucket, stored)
            checkpoint = found[0] if found else None
            if not checkpoint_ready(state, checkpoint):
                continue
            pids = self._source.kill_busy(
                lambda busy: any(run_id_of(r.body) == stored for r in busy.records)
            )
            if pids:
                text = checkpoint.partial_text if checkpoint is not None else ""
                self._kills.setdefault(run_id, []).append(Kill(point, tuple(pids), text))
                del pending[index]

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
        # The armed points are this run's.
        self._pending[run_id] = dict(enumerate(self._armed))
        return StartedRun(thread_id, run_id)

    def _busy_with(self, run_id: str) -> bool:
        stored = self._stored(run_id)
        return any(
            run_id_of(r.body) == stored for busy in self._source.busy() for r in busy.records
        )

    def wait(self, started: StartedRun, *, timeout: float = HUNG) -> RunOutcome:
        """Wait until the run has ended and no worker runs it; killing its worker at each
        armed point on the way."""
        deadline = time.monotonic() + timeout
        while True:
            self._handle_kills(started.run_id)
            run = self._ok("GET", f"/runs/{started.run_id}")
            if run["status"] in ENDED and not self._busy_with(started.run_id):
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"run {started.run_id} still {run['status']} after {timeout:g}s; the "
                    f"worker logs are in {self.directory / 'logs'}"
                )
            time.sleep(0.05)
        unreached = self._pending.pop(started.run_id, {})
        self.kill_at()  # disarmed: the next run passes every point
        if unreached:
            points = ", ".join(p.describe() for p in unreached.values())
            raise AssertionError(f"run {started.run_id} ended before its kill point: {points}")
        return RunOutcome(
            run_id=started.run_id,
            thread_id=started.thread_id,
            status=run["status"],
            error=run.get("error"),
            messages=self.thread(started.thread_id)["messages"],
            plans=self._plans(started.run_id),
            invocations=self._invocations(started.run_id),
            kills=self._kills.pop(started.run_id, []),
        )

    def run(self, message: str, **kwargs: Any) -> RunOutcome:
        """:meth:`start_run`, then :meth:`wait`."""
        return self.wait(self.start_run(message, **kwargs))

    # -- what the workers did

    def tool_runs(self, tool: str | None = None) -> list[ToolRun]:
        """Every start of a tool's function (``tool``'s only, when given), in order."""
        path = self.directory / CALLS_FILE
        if not path.exists():
            return []
        starts: list[dict[str, Any]] = []
        ends: dict[tuple[Any, ...], dict[str, Any]] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
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
        return [r for r in runs if tool is None or r.tool == tool]

    def _plans(self, run_id: str) -> list[str]:
        stored = self._stored(run_id)
        ended = []
        for log in (self.directory / "logs").glob("*.log"):
            for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if (
                    isinstance(record, dict)
                    and record.get("message") == "run invocation ended"
                    and record.get("run_id") == stored
                ):
                    ended.append(record)
        ended.sort(key=lambda r: str(r.get("timestamp")))
        return [plan for record in ended for plan in record.get("plans") or ()]

    def _invocations(self, run_id: str) -> list[str]:
        stored = self._stored(run_id)
        return [
            result.outcome
            for result in self._source.results()
            if any(run_id_of(r.body) == stored for r in result.records)
        ]

    def sweep(self) -> Any:
        """One run of the sweeper's handler, in this process (as its schedule would)."""
        from awaken_s3.local.lambda_context import in_process_context
        from awaken_s3.service.sweeper_job import lambda_handler

        event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
        context: Any = in_process_context("sweeper", region=self.region, timeout=60)
        return lambda_handler(event, context)
