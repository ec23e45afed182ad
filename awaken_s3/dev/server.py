"""``awaken-s3 dev``: the stack on this machine, and the HTTP server in front of it.

:class:`DevStack` starts, in order: a moto server (unless told to use the AWS botocore
finds), the bucket, table and queues (:mod:`awaken_s3.dev.resources`), the local SQS event
source running the real worker handler in killable containers, a watcher of checkpoints (for
the console's resume history), the sweeper handler on a timer, and an HTTP server on
127.0.0.1 that serves

* the HTTP API: each request becomes an API Gateway HTTP API (payload 2.0) event for the real
  API handler (:mod:`awaken_s3.dev.apigw`), with the dev identity's JWT claims;
* ``/dev/...``: dev-only endpoints the console needs and the Lambda API must not have
  (a caller's thread list, a run's internals, killing the worker that drives a run);
* ``/``: the web console (static files, no build step).

:meth:`DevStack.stop` stops all of it, each process by its PID.

The stack serves one app (``--app MODULE:ATTRIBUTE``, imported from the current directory or
the environment's path; the dev app of :mod:`awaken_s3.dev.model` without one): the API in
this process and every worker container load the same one. With ``--reload`` a change to the
app's files re-imports it here and restarts the workers (the run in flight is killed and
resumes from its checkpoint, which is the product's point).

The API and the sweeper run in this process, one invocation at a time, as one Lambda
container would: Powertools' resolver keeps the current event on the class, so two requests
at once in one process would see each other's.
"""

from __future__ import annotations

import hmac
import importlib
import importlib.resources
import importlib.util
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from awaken_s3.dev import apigw
from awaken_s3.dev.resources import (
    Stack,
    StackNames,
    create_stack,
    function_environment,
    read_checkpoint,
)
from awaken_s3.errors import AwakenError
from awaken_s3.local.lambda_context import LocalLambdaContext, in_process_context
from awaken_s3.service.queue import run_id_of
from awaken_s3.settings import DEFAULT_CHECKPOINT_PREFIX as CHECKPOINT_PREFIX
from awaken_s3.stores.s3_protocol import run_id_from_key

DEFAULT_PORT: Final = 8787
DEFAULT_SUB: Final = "dev-user"
ISSUER: Final = "https://awaken-dev.local/"
AUDIENCE: Final = "awaken-dev"
SCRIPTED_MODEL: Final = "dev-scripted"
#: the smallest WorkerTimeout template.yaml allows
WORKER_TIMEOUT: Final = 120
API_TIMEOUT: Final = 29
#: API Gateway's payload limit
MAX_BODY: Final = 10 * 1024 * 1024
_STATIC: Final = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/console.css": ("console.css", "text/css; charset=utf-8"),
}


class DevError(AwakenError):
    """The dev stack cannot start; the message says why and what to do."""


@dataclass
class DevOptions:
    port: int = DEFAULT_PORT
    #: None: no token needed; else every API and /dev request needs ``Bearer <token>``
    token: str | None = None
    #: None: the scripted model; else a provider name for the worker (AWAKEN_PROVIDER)
    provider: str | None = None
    #: use the endpoint and credentials botocore finds instead of an embedded moto server
    external_aws: bool = False
    name: str = "awaken-dev"
    sub: str = DEFAULT_SUB
    workers: int = 2
    lease_seconds: float = 6.0
    sweep_interval: float = 60.0
    scripted_delay: float = 0.08
    scripted_chunk: int = 4
    log_dir: Path | None = None
    #: ``MODULE:ATTRIBUTE`` of the app to serve; None: the dev app
    app: str | None = None
    #: restart the workers (and re-import the app) when the app's files change
    reload: bool = False
    #: the directory the app is imported from (``sys.path[0]`` of the API and the workers)
    app_dir: Path | None = None


@dataclass
class RunTimeline:
    """What the dev server saw of one run: its checkpoint writers and invocations."""

    writers: list[dict[str, Any]] = field(default_factory=list)
    invocations: list[dict[str, Any]] = field(default_factory=list)


class DevStack:
    def __init__(self, options: DevOptions) -> None:
        self.options = options
        self.moto: Any = None
        self.stack: Stack | None = None
        self.endpoint_url: str | None = None
        self.region = "us-east-1"
        self.exports: dict[str, str] = {}
        self.log_dir: Path = options.log_dir or Path(tempfile.mkdtemp(prefix="awaken-dev-logs-"))
        self._source: Any = None
        self._source_thread: Any = None
        self._server: ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        #: one in-process invocation at a time (see the module's docstring)
        self._invoke_lock = threading.Lock()
        self._timeline_lock = threading.Lock()
        self._timelines: dict[str, RunTimeline] = {}
        self._clients: dict[str, Any] = {}
        self._api: Any = None
        self._sweeper: Any = None
        self.app: Any = None
        self.reloads = 0
        self.sweeps = 0

    # -- lifecycle

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    @property
    def app_ref(self) -> str:
        from awaken_s3.dev.worker import DEV_APP

        return self.options.app or DEV_APP

    @property
    def app_dir(self) -> Path:
        return (self.options.app_dir or Path.cwd()).resolve()

    def load_app(self, *, fresh: bool = False) -> Any:
        """Import the app here (the API's), as every worker will; ``fresh``: re-import the
        app's own modules (those under :attr:`app_dir`) from their files."""
        from awaken_s3.agents import AgentDefinitionError, load_app

        root = str(self.app_dir)
        if root not in sys.path:
            sys.path.insert(0, root)
        if fresh:
            for name, module in list(sys.modules.items()):
                origin = getattr(module, "__file__", None) or ""
                if (
                    origin.startswith(root + os.sep)
                    and f"{os.sep}site-packages{os.sep}" not in origin
                ):
                    del sys.modules[name]
            importlib.invalidate_caches()
        try:
            return load_app(self.app_ref)
        except AgentDefinitionError as exc:
            raise DevError(f"--app {self.app_ref}: {exc}") from exc
        except Exception as exc:  # the user's module failed to import: say where
            raise DevError(f"--app {self.app_ref}: importing it failed: {exc!r}") from exc

    def _start(self) -> None:
        import boto3

        options = self.options
        # First: a broken app is reported before anything starts.
        self.app = self.load_app()
        session = boto3.Session()
        self.region = session.region_name or "us-east-1"
        env: dict[str, str] = {"AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region}
        if not options.external_aws:
            from awaken_s3.local.moto import MotoServer

            self.moto = MotoServer.start()
            self.endpoint_url = self.moto.endpoint_url
            # Only S3, DynamoDB and SQS go to moto: a real provider's Bedrock, SSM or Secrets
            # Manager calls still reach AWS with the credentials botocore finds.
            for service in ("S3", "DYNAMODB", "SQS"):
                env[f"AWS_ENDPOINT_URL_{service}"] = self.endpoint_url
            if session.get_credentials() is None:
                # moto takes any credentials; these only make botocore sign its requests.
                env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
        os.environ.update(env)
        self.stack = create_stack(
            boto3.Session(),
            StackNames.from_name(options.name),
            region=self.region,
            worker_timeout=WORKER_TIMEOUT,
            endpoint_url=self.endpoint_url,
        )
        env.update(self._function_env())
        os.environ.update(env)
        self.exports = self._exports(env)
        # The very code the Lambda entry points name (handlers/ only re-exports them).
        self._api = importlib.import_module("awaken_s3.service.http")
        self._sweeper = importlib.import_module("awaken_s3.service.sweeper_job")
        self._start_workers()
        self._spawn(self._watch_checkpoints, "checkpoint watcher")
        if options.sweep_interval > 0:
            self._spawn(self._sweep_forever, "sweeper")
        if options.reload:
            self._spawn(self._reload_on_change, "reloader")
        self._serve()

    def _function_env(self) -> dict[str, str]:
        """The environment template.yaml gives the functions, with the dev server's choices."""
        assert self.stack is not None
        options = self.options
        env = {
            # A short lease, so that a killed worker's run resumes within seconds.
            **function_environment(self.stack, lease_seconds=options.lease_seconds),
            "AWAKEN_DEV_SCRIPTED_DELAY": str(options.scripted_delay),
            "AWAKEN_DEV_SCRIPTED_CHUNK": str(options.scripted_chunk),
        }
        if options.provider is None:
            # Any provider name passes the API's settings check; the worker never builds it.
            env.update(AWAKEN_DEV_MODEL="scripted", AWAKEN_PROVIDER="anthropic")
            env["AWAKEN_MODEL"] = SCRIPTED_MODEL
        else:
            env.update(AWAKEN_DEV_MODEL="provider", AWAKEN_PROVIDER=options.provider)
        env["AWAKEN_DEV_APP"] = self.app_ref
        env["POWERTOOLS_LOG_LEVEL"] = os.environ.get("POWERTOOLS_LOG_LEVEL") or "INFO"
        # The in-process API's and sweeper's EMF lines would interleave with their logs in
        # this terminal; the workers' (in their log files) are kept.
        env["POWERTOOLS_METRICS_DISABLED"] = "true"
        return env

    def _exports(self, env: Mapping[str, str]) -> dict[str, str]:
        exports: dict[str, str] = {}
        if self.endpoint_url is not None:
            exports["AWS_ENDPOINT_URL"] = self.endpoint_url
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            if name in env:
                exports[name] = env[name]
        exports["AWS_DEFAULT_REGION"] = self.region
        for name in ("AWAKEN_BUCKET", "AWAKEN_TABLE", "AWAKEN_QUEUE_URL"):
            exports[name] = env[name]
        return exports

    def _start_workers(self) -> None:
        from awaken_s3.local.containers import FunctionConfig
        from awaken_s3.local.event_source import EventSourceThread, SqsEventSource

        assert self.stack is not None
        worker = FunctionConfig(
            handler="awaken_s3.dev.worker:lambda_handler",
            timeout=WORKER_TIMEOUT,
            name=f"{self.options.name}-worker",
            env={"POWERTOOLS_METRICS_DISABLED": "false"},
            # The containers import the app from where this process does.
            cwd=str(self.app_dir),
        )
        self._source = SqsEventSource(
            self.stack.queue_url,
            worker,
            endpoint_url=self.endpoint_url,
            region=self.region,
            max_concurrency=self.options.workers,
            on_invocation=self._on_invocation,
            log_dir=self.log_dir,
            stop_grace=2,
        )
        self._source_thread = EventSourceThread(self._source)
        self._source_thread.start()

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _serve(self) -> None:
        stack = self

        class Handler(_RequestHandler):
            dev = stack

        try:
            self._server = ThreadingHTTPServer(("127.0.0.1", self.options.port), Handler)
        except OSError as exc:
            raise DevError(f"cannot listen on 127.0.0.1:{self.options.port}: {exc}") from exc
        self._server.daemon_threads = True
        self._spawn(self._server.serve_forever, "http")

    def stop(self) -> None:
        """Stop everything :meth:`start` started; safe to call twice."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._source_thread is not None:
            self._source_thread.stop(grace=2)
            self._source_thread = None
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads.clear()
        if self.moto is not None:
            self.moto.stop()
            self.moto = None

    # -- AWS clients (boto3 clients are thread-safe; the session that makes them is not)

    def client(self, service: str) -> Any:
        with self._timeline_lock:
            if service not in self._clients:
                import boto3

                session: Any = boto3.Session()
                self._clients[service] = session.client(
                    service, region_name=self.region, endpoint_url=self.endpoint_url
                )
            return self._clients[service]

    # -- in-process functions

    def _context(self, name: str, timeout: float) -> LocalLambdaContext:
        return in_process_context(name, region=self.region, timeout=timeout, log_stream_name="dev")

    def invoke_api(self, event: dict[str, Any]) -> Any:
        with self._invoke_lock:
            handler = self._api.handler_for(self.app)
            return handler(event, self._context(f"{self.options.name}-api", API_TIMEOUT))

    # -- --reload

    def reload(self) -> list[int]:
        """Re-import the app and restart the workers: the containers are killed (a run in
        flight resumes from its checkpoint, on a container that imports the new code)."""
        try:
            app = self.load_app(fresh=True)
        except DevError as exc:
            print(f"awaken-s3 dev: not reloaded: {exc}", file=sys.stderr)
            return []
        with self._invoke_lock:
            self.app = app
        pids = self._source.recycle() if self._source is not None else []
        self.reloads += 1
        print(
            f"awaken-s3 dev: reloaded {self.app_ref}; restarted {len(pids)} worker(s)",
            file=sys.stderr,
        )
        return pids

    def _reload_on_change(self) -> None:
        from watchfiles import PythonFilter, watch

        for _changes in watch(
            self.app_dir, watch_filter=PythonFilter(), stop_event=self._stopping, debounce=400
        ):
            self.reload()

    def sweep(self) -> Any:
        with self._invoke_lock:
            event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
            result = self._sweeper.lambda_handler(
                event, self._context(f"{self.options.name}-sweeper", 60)
            )
        self.sweeps += 1
        return result

    def _sweep_forever(self) -> None:
        while not self._stopping.wait(self.options.sweep_interval):
            try:
                self.sweep()
            except Exception as exc:  # a failed sweep is retried at the next tick, as on AWS
                print(f"awaken-s3 dev: sweep failed: {exc}", file=sys.stderr)

    # -- what the console shows

    def _on_invocation(self, result: Any) -> None:
        for record in result.records:
            run_id = run_id_of(record.body)
            if run_id is None:
                continue
            with self._timeline_lock:
                timeline = self._timelines.setdefault(run_id, RunTimeline())
                timeline.invocations.append(
                    {
                        "pid": result.pid,
                        "outcome": result.outcome,
                        "started_at": result.started_at,
                        "duration": round(result.duration, 3),
                        "cold_start": result.cold_start,
                        "log_stream": result.log_stream_name,
                    }
                )

    def _watch_checkpoints(self) -> None:
        """Note every new writer (lease epoch) of every checkpoint, and the plan it resumed
        with: the checkpoint itself keeps only the latest."""
        while not self._stopping.wait(0.25):
            try:
                self._look_at_checkpoints()
            except Exception as exc:  # moto restarting, a network blip: look again later
                print(f"awaken-s3 dev: checkpoint watcher: {exc}", file=sys.stderr)

    def _look_at_checkpoints(self) -> None:
        assert self.stack is not None
        s3 = self.client("s3")
        listing = s3.list_objects_v2(Bucket=self.stack.names.bucket, Prefix=CHECKPOINT_PREFIX)
        for item in listing.get("Contents", ()):
            run_id = run_id_from_key(CHECKPOINT_PREFIX, item["Key"])
            if run_id is None:  # not a checkpoint's key
                continue
            stored = self.read_checkpoint(run_id)
            if stored is None:
                continue
            checkpoint, version = stored
            entry = {
                "epoch": checkpoint.epoch,
                "writer": checkpoint.writer,
                "turn": checkpoint.turn,
                "resumed_with": checkpoint.resumed_with,
                "text_length_at_start": len(checkpoint.partial_text),
                "text_length_last": len(checkpoint.partial_text),
                "first_seen": time.time(),
                "version": version,
            }
            with self._timeline_lock:
                writers = self._timelines.setdefault(run_id, RunTimeline()).writers
                last = writers[-1] if writers else None
                key = ("epoch", "writer", "turn", "resumed_with")
                if last is None or any(last[k] != entry[k] for k in key):
                    writers.append(entry)
                else:
                    last["version"] = version
                    last["text_length_last"] = entry["text_length_last"]

    def read_checkpoint(self, run_id: str) -> tuple[Any, str] | None:
        assert self.stack is not None
        return read_checkpoint(self.client("s3"), self.stack.names.bucket, run_id)

    def threads(self) -> list[dict[str, Any]]:
        """The dev identity's threads, newest first, each with its runs (a table scan: fine
        for a local table, never done by the Lambda API)."""
        from awaken_s3.service.scoping import public_id
        from awaken_s3.threads import codec

        assert self.stack is not None
        sub = self.options.sub
        paginator = self.client("dynamodb").get_paginator("scan")
        threads: dict[str, dict[str, Any]] = {}
        runs: list[Any] = []
        for page in paginator.paginate(
            TableName=self.stack.names.table,
            FilterExpression="#owner = :owner AND sk IN (:thread, :run)",
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues={
                ":owner": {"S": sub},
                ":thread": {"S": codec.THREAD_SK},
                ":run": {"S": codec.RUN_SK},
            },
        ):
            for item in page.get("Items", ()):
                if item["sk"]["S"] == codec.THREAD_SK:
                    thread = codec.decode_thread(item)
                    threads[thread.thread_id] = {
                        "thread_id": public_id(sub, thread.thread_id),
                        "message_count": thread.message_count,
                        "created_at": thread.created_at,
                        "runs": [],
                    }
                else:
                    runs.append(codec.decode_run(item))
        for run in sorted(runs, key=lambda r: r.created_at, reverse=True):
            if run.thread_id in threads:
                threads[run.thread_id]["runs"].append(
                    {
                        "run_id": public_id(sub, run.run_id),
                        "status": run.status.value,
                        "turn": run.turn,
                        "created_at": run.created_at,
                    }
                )
        return sorted(threads.values(), key=lambda t: t["created_at"], reverse=True)

    def run_internals(self, public_run_id: str) -> dict[str, Any] | None:
        """What the console shows of a run beyond the API: the lease, the checkpoint's
        fencing fields, tool-call claims, the containers driving it, its resume history."""
        from awaken_s3.service.scoping import scoped_id
        from awaken_s3.threads import codec

        assert self.stack is not None
        run_id = scoped_id(self.options.sub, public_run_id)
        db = self.client("dynamodb")
        item = db.get_item(
            TableName=self.stack.names.table,
            Key=codec.to_wire(codec.run_key(run_id)),
            ConsistentRead=True,
        ).get("Item")
        if item is None:
            return None
        run = codec.decode_run(item)
        if run.owner != self.options.sub:
            return None
        tools = db.query(
            TableName=self.stack.names.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :tool)",
            ExpressionAttributeValues={
                ":pk": {"S": codec.run_pk(run_id)},
                ":tool": {"S": codec.TOOL_PREFIX},
            },
            ConsistentRead=True,
        ).get("Items", [])
        stored = self.read_checkpoint(run_id)
        checkpoint = None
        if stored is not None:
            cp, version = stored
            checkpoint = {
                "version": version.strip('"'),
                "epoch": cp.epoch,
                "writer": cp.writer,
                "turn": cp.turn,
                "resumed_with": cp.resumed_with,
                "retry_count": cp.retry_count,
                "text_length": len(cp.partial_text),
                "tool_calls": [call.model_dump() for call in cp.tool_calls],
                "updated_at": cp.updated_at.isoformat(),
            }
        workers = [
            {"pid": busy.pid, "started_at": busy.started_at, "log_stream": busy.log_stream_name}
            for busy in (self._source.busy() if self._source is not None else [])
            if any(run_id_of(record.body) == run_id for record in busy.records)
        ]
        with self._timeline_lock:
            timeline = self._timelines.get(run_id, RunTimeline())
            writers = [dict(w) for w in timeline.writers]
            invocations = [dict(i) for i in timeline.invocations]
        return {
            "run_id": public_run_id,
            "stored_run_id": run_id,
            "status": run.status.value,
            "turn": run.turn,
            "lease": {
                "epoch": run.lease.epoch,
                "owner": run.lease.owner,
                "expires_in": round(run.lease.lease_until - time.time(), 1)
                if run.lease.owner
                else None,
            },
            "checkpoint": checkpoint,
            "tool_calls": [
                {
                    "id": record.tool_use_id,
                    "name": record.name,
                    "status": record.status.value,
                    "epoch": record.epoch,
                    "attempts": record.attempts,
                    "is_error": record.is_error,
                }
                for record in (codec.decode_tool(t) for t in tools)
            ],
            "workers": workers,
            "writers": writers,
            "invocations": invocations,
        }

    def kill(self, public_run_id: str) -> list[int]:
        """SIGKILL the containers driving the run (through the event source, by PID)."""
        from awaken_s3.service.scoping import scoped_id

        run_id = scoped_id(self.options.sub, public_run_id)
        if self._source is None:
            return []
        pids: list[int] = self._source.kill_busy(
            lambda busy: any(run_id_of(r.body) == run_id for r in busy.records)
        )
        return pids

    def info(self) -> dict[str, Any]:
        assert self.stack is not None
        return {
            "identity": self.options.sub,
            "model": "scripted" if self.options.provider is None else self.options.provider,
            "model_id": os.environ.get("AWAKEN_MODEL"),
            "app": self.app_ref,
            "agents": list(self.app.names) if self.app is not None else [],
            "reloads": self.reloads,
            "token_required": self.options.token is not None,
            "storage": self.endpoint_url or "AWS",
            "lease_seconds": self.options.lease_seconds,
            "workers": self.options.workers,
            "sweeps": self.sweeps,
            "log_dir": str(self.log_dir),
        }


# -- HTTP


def _json(status: int, body: Any) -> apigw.HttpResponse:
    return apigw.HttpResponse(
        status,
        (("Content-Type", "application/json"), ("Cache-Control", "no-store")),
        json.dumps(body).encode("utf-8"),
    )


def _dev_error(status: HTTPStatus, code: str, message: str) -> apigw.HttpResponse:
    return _json(int(status), {"error": code, "message": message})


class _RequestHandler(BaseHTTPRequestHandler):
    dev: DevStack
    server_version = "awaken-s3-dev"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        # The console polls several times a second: an access log would bury the banner.
        return

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        try:
            response = self._answer()
        except Exception as exc:  # the dev server itself failed: say so, keep serving
            print(f"awaken-s3 dev: {self.command} {self.path}: {exc!r}", file=sys.stderr)
            response = apigw.gateway_error(500, "Internal Server Error")
        self._write(response)

    def _read_body(self) -> bytes | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _authorized(self) -> bool:
        token = self.dev.options.token
        if token is None:
            return True
        given = self.headers.get("Authorization") or ""
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    def _answer(self) -> apigw.HttpResponse:
        body = self._read_body()
        if body is None:
            self.close_connection = True
            return apigw.gateway_error(413, "Request Entity Too Large")
        path = self.path.split("?", 1)[0]
        if self.command == "GET" and path in _STATIC:
            return self._static(*_STATIC[path])
        if path.startswith("/dev/"):
            if not self._authorized():
                return apigw.gateway_error(401, "Unauthorized")
            return self._dev(path)
        # API Gateway matches the route first (an unknown one is its 404), then runs the
        # route's JWT authorizer, whose refusal never reaches the function.
        found = apigw.route_for(self.command, path)
        if found is None:
            return apigw.gateway_error(404, "Not Found")
        if not self._authorized():
            return apigw.gateway_error(401, "Unauthorized")
        request = apigw.HttpRequest(
            method=self.command,
            target=self.path,
            headers=tuple(self.headers.items()),
            body=body,
            source_ip=self.client_address[0],
        )
        route, parameters = found
        claims = apigw.jwt_claims(
            self.dev.options.sub, issuer=ISSUER, audience=AUDIENCE, now=time.time()
        )
        event = apigw.http_api_event(request, route, parameters, claims=claims)
        return apigw.http_response(self.dev.invoke_api(event))

    def _static(self, name: str, content_type: str) -> apigw.HttpResponse:
        data = importlib.resources.files("awaken_s3.dev").joinpath("static", name).read_bytes()
        return apigw.HttpResponse(
            200, (("Content-Type", content_type), ("Cache-Control", "no-cache")), data
        )

    def _dev(self, path: str) -> apigw.HttpResponse:
        from awaken_s3.ids import InvalidIdError
        from awaken_s3.service.scoping import validate_public_run_id

        parts = path.strip("/").split("/")
        if parts == ["dev", "info"] and self.command == "GET":
            return _json(200, self.dev.info())
        if parts == ["dev", "threads"] and self.command == "GET":
            return _json(200, {"threads": self.dev.threads()})
        if len(parts) in (3, 4) and parts[1] == "runs":
            try:
                run_id = validate_public_run_id(parts[2])
            except InvalidIdError as exc:
                return _dev_error(HTTPStatus.BAD_REQUEST, "invalid_id", str(exc))
            if len(parts) == 3 and self.command == "GET":
                internals = self.dev.run_internals(run_id)
                if internals is None:
                    return _dev_error(HTTPStatus.NOT_FOUND, "not_found", f"run {run_id} not found")
                return _json(200, internals)
            if parts[3:] == ["kill"] and self.command == "POST":
                pids = self.dev.kill(run_id)
                if not pids:
                    return _dev_error(
                        HTTPStatus.CONFLICT, "no_worker", f"no worker is driving run {run_id} now"
                    )
                return _json(200, {"killed": pids})
        if parts == ["dev", "sweep"] and self.command == "POST":
            return _json(200, self.dev.sweep())
        return _dev_error(HTTPStatus.NOT_FOUND, "not_found", "no such dev endpoint")

    def _write(self, response: apigw.HttpResponse) -> None:
        self.send_response(response.status)
        names = set()
        for name, value in response.headers:
            names.add(name.lower())
            self.send_header(name, value)
        if "content-length" not in names:
            self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD" and response.status not in (204, 304):
            self.wfile.write(response.body)


def new_token() -> str:
    return secrets.token_urlsafe(24)
