"""``awaken-s3 dev``: the stack on this machine, wired from parts that each live apart.

:class:`DevStack` starts, in order: a moto server (unless told to use the AWS botocore
finds), the bucket, table and queues (:mod:`~awaken_s3.dev.resources`), the HTTP server on
127.0.0.1 (:mod:`~awaken_s3.dev.web`: the HTTP API, the WebSocket API, the ``/dev``
endpoints and the console), the local SQS event source running the real worker handler in
killable containers (:mod:`~awaken_s3.dev.workers`), and beside the server the checkpoint
watcher (:mod:`~awaken_s3.dev.timeline`), the sweeper on a timer and, with ``--reload``, the
reloader. :meth:`DevStack.stop` stops all of it, each process by its PID.

The stack serves one app (``--app MODULE:ATTRIBUTE``, imported from the current directory or
the environment's path; the dev app of :mod:`awaken_s3.dev.model` without one): the API in
this process and every worker container load the same one. With ``--reload`` a change to the
app's files re-imports it here and restarts the workers (the run in flight is killed and
resumes from its checkpoint, which is the product's point). The API, the socket handler and
the sweeper run in this process one invocation at a time (:mod:`~awaken_s3.dev.functions`).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import secrets
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from awaken_s3.dev.functions import LocalFunctions
from awaken_s3.dev.resources import Stack, StackNames, create_stack, function_environment
from awaken_s3.dev.sockets import SocketGateway
from awaken_s3.dev.timeline import WATCH_INTERVAL, CheckpointWatcher, Timelines
from awaken_s3.dev.web import DevParts, WebServer, application, listen
from awaken_s3.dev.workers import Workers
from awaken_s3.errors import AwakenError
from awaken_s3.service.wiring import Services

DEFAULT_PORT: Final = 8787
DEFAULT_SUB: Final = "dev-user"
SCRIPTED_MODEL: Final = "dev-scripted"
#: the smallest WorkerTimeout template.yaml allows
WORKER_TIMEOUT: Final = 120


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


class DevStack:
    def __init__(self, options: DevOptions) -> None:
        self.options = options
        self.moto: Any = None
        self.stack: Stack | None = None
        self.endpoint_url: str | None = None
        self.region = "us-east-1"
        self.exports: dict[str, str] = {}
        self.log_dir: Path = options.log_dir or Path(tempfile.mkdtemp(prefix="awaken-dev-logs-"))
        self.timelines = Timelines()
        self.functions: LocalFunctions | None = None
        self.workers: Workers | None = None
        self._server: WebServer | None = None
        self.app: Any = None
        self.reloads = 0

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.port}"

    @property
    def socket_url(self) -> str:
        return self.url.replace("http://", "ws://", 1) + "/ws"

    @property
    def app_ref(self) -> str:
        from awaken_s3.dev.worker import DEV_APP

        return self.options.app or DEV_APP

    @property
    def app_dir(self) -> Path:
        return (self.options.app_dir or Path.cwd()).resolve()

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

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
        # First: a broken app is reported before anything starts.
        self.app = self.load_app()
        env = self._storage_env()
        os.environ.update(env)
        self.stack = create_stack(
            _session(),
            StackNames.from_name(self.options.name),
            region=self.region,
            worker_timeout=WORKER_TIMEOUT,
            endpoint_url=self.endpoint_url,
        )
        env.update(self._function_env())
        os.environ.update(env)
        self.exports = self._exports(env)
        self.functions = LocalFunctions(self.options.name, self.region, self.app)
        self._serve()
        self._start_workers()

    def _storage_env(self) -> dict[str, str]:
        """Where the stack's storage is: moto (started now) or the AWS botocore finds."""
        session = _session()
        self.region = session.region_name or "us-east-1"
        env = {"AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region}
        if self.options.external_aws:
            return env
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
        return env

    def _function_env(self) -> dict[str, str]:
        """The environment template.yaml gives the functions, with the dev server's choices."""
        assert self.stack is not None
        options = self.options
        env = {
            # A short lease, so that a killed worker's run resumes within seconds.
            **function_environment(self.stack, lease_seconds=options.lease_seconds),
            "AWAKEN_DEV_SCRIPTED_DELAY": str(options.scripted_delay),
            "AWAKEN_DEV_SCRIPTED_CHUNK": str(options.scripted_chunk),
            "AWAKEN_DEV_APP": self.app_ref,
            "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL") or "INFO",
            # The in-process API's and sweeper's EMF lines would interleave with their logs in
            # this terminal; the workers' (in their log files) are kept.
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
        if options.provider is None:
            # Any provider name passes the API's settings check; the worker never builds it.
            env.update(AWAKEN_DEV_MODEL="scripted", AWAKEN_PROVIDER="anthropic")
            env["AWAKEN_MODEL"] = SCRIPTED_MODEL
        else:
            env.update(AWAKEN_DEV_MODEL="provider", AWAKEN_PROVIDER=options.provider)
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

    def _serve(self) -> None:
        from awaken_s3.local.containers import FunctionConfig

        assert self.functions is not None and self.stack is not None
        worker = FunctionConfig(
            handler="awaken_s3.dev.worker:lambda_handler",
            timeout=WORKER_TIMEOUT,
            name=f"{self.options.name}-worker",
            env={"POWERTOOLS_METRICS_DISABLED": "false"},
            # The containers import the app from where this process does.
            cwd=str(self.app_dir),
        )
        self.workers = Workers(
            worker,
            queue_url=self.stack.queue_url,
            endpoint_url=self.endpoint_url,
            region=self.region,
            concurrency=self.options.workers,
            log_dir=self.log_dir,
            timelines=self.timelines,
        )
        sockets = SocketGateway(
            self.functions, principal=self.options.sub, token=self.options.token
        )
        parts = DevParts(
            functions=self.functions,
            sockets=sockets,
            workers=self.workers,
            timelines=self.timelines,
            sub=self.options.sub,
            token=self.options.token,
            info=self.info,
            background=self._background(),
        )
        try:
            sock = listen(self.options.port)
        except OSError as exc:
            raise DevError(f"cannot listen on 127.0.0.1:{self.options.port}: {exc}") from exc
        port: int = sock.getsockname()[1]
        # The management API the worker and the socket handler post frames to is this
        # server's: botocore's own endpoint setting for the service, as on AWS, whose
        # endpoint ends in the stage; here in the path that lets them in.
        url = f"http://127.0.0.1:{port}{sockets.management_path}"
        os.environ["AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI"] = url
        self._server = WebServer(application(parts, port), sock)

    def _start_workers(self) -> None:
        assert self.workers is not None
        self.workers.start()

    def _background(self) -> list[Any]:
        async def watch(services: Services) -> None:
            await CheckpointWatcher(
                services.checkpoints, self.timelines, interval=WATCH_INTERVAL
            ).run()

        tasks: list[Any] = [watch]
        if self.options.sweep_interval > 0:
            tasks.append(self._sweep_forever)
        if self.options.reload:
            tasks.append(self._reload_on_change)
        return tasks

    async def _sweep_forever(self, services: Services) -> None:
        assert self.functions is not None
        while True:
            await asyncio.sleep(self.options.sweep_interval)
            try:
                await self.functions.sweep()
            except Exception as exc:  # a failed sweep is retried at the next tick, as on AWS
                print(f"awaken-s3 dev: sweep failed: {exc}", file=sys.stderr)

    def reload(self) -> list[int]:
        """Re-import the app and restart the workers: the containers are killed (a run in
        flight resumes from its checkpoint, on a container that imports the new code)."""
        assert self.functions is not None and self.workers is not None
        try:
            app = self.load_app(fresh=True)
        except DevError as exc:
            print(f"awaken-s3 dev: not reloaded: {exc}", file=sys.stderr)
            return []
        self.app = self.functions.app = app
        pids = self.workers.recycle()
        self.reloads += 1
        print(
            f"awaken-s3 dev: reloaded {self.app_ref}; restarted {len(pids)} worker(s)",
            file=sys.stderr,
        )
        return pids

    async def _reload_on_change(self, services: Services) -> None:
        from watchfiles import PythonFilter, awatch

        async for _changes in awatch(self.app_dir, watch_filter=PythonFilter(), debounce=400):
            # Between two invocations of the in-process functions, as a deploy would.
            assert self.functions is not None
            await asyncio.get_running_loop().run_in_executor(self.functions.executor, self.reload)

    def stop(self) -> None:
        """Stop everything :meth:`start` started; safe to call twice."""
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self.workers is not None:
            self.workers.stop()
            self.workers = None
        if self.functions is not None:
            self.functions.close()
            self.functions = None
        if self.moto is not None:
            self.moto.stop()
            self.moto = None

    def info(self) -> dict[str, Any]:
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
            "sweeps": self.functions.sweeps if self.functions is not None else 0,
            "log_dir": str(self.log_dir),
        }


def _session() -> Any:
    import boto3

    return boto3.Session()


def new_token() -> str:
    return secrets.token_urlsafe(24)
