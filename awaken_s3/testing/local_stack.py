"""The harness's local stack: moto's resources, the environment, the API and worker functions.

:class:`LocalStack` creates, on a moto server, the bucket, table and FIFO queues the template
declares (:mod:`awaken_s3.dev.resources`), fresh for every harness; loads the app; builds the
HTTP API's handler over it (called in this process); and starts the worker handler
(:mod:`awaken_s3.testing.worker`) in killable local containers fed by the SQS event source.
While it runs, this process's environment points every AWS client at moto with fake
credentials (a developer's real profile and session are removed), and :meth:`LocalStack.stop`
puts it back. What a test does with the stack is :class:`~awaken_s3.testing.harness.Harness`.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from awaken_s3.errors import AwakenError

if TYPE_CHECKING:
    from awaken_s3.dev.resources import Stack, StackNames
    from awaken_s3.local.event_source import EventSourceThread, SqsEventSource
    from awaken_s3.models import StreamCheckpoint

WORKER_TIMEOUT: Final = 60
SCRIPTED_MODEL: Final = "awaken-scripted"
#: never a developer's real account: these go while the harness runs
_CREDENTIALS: Final = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


class HarnessError(AwakenError, RuntimeError):
    """The harness cannot run the app (the message says why)."""


class LocalStack:
    """The stack of one harness: see the module's docstring (the arguments are the
    :class:`~awaken_s3.testing.harness.Harness`'s)."""

    def __init__(
        self,
        app_ref: str,
        *,
        endpoint_url: str,
        directory: Path,
        root: Path,
        env: Mapping[str, str],
        lease_seconds: float,
        workers: int,
        region: str,
    ) -> None:
        self.app_ref = app_ref
        self.endpoint_url = endpoint_url
        self.directory = directory
        self.root = root
        self.env = env
        self.lease_seconds = lease_seconds
        self.workers = workers
        self.region = region
        #: set by start(): the app, its storage, the API's handler, the workers' event source
        self.app: Any = None
        self.stack: Stack | None = None
        self.api: Any = None
        self.source: SqsEventSource | None = None
        self._thread: EventSourceThread | None = None
        self._saved: dict[str, str | None] = {}
        self._clients: dict[str, Any] = {}

    def start(self) -> None:
        """Start everything; on any failure, stop what started and raise."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        import boto3

        from awaken_s3.dev.resources import StackNames, create_stack
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
        self.app = self._load_app()
        names = StackNames.from_name(f"awaken-test-{uuid.uuid4().hex[:12]}")
        self.stack = create_stack(
            boto3.Session(),
            names,
            region=self.region,
            worker_timeout=WORKER_TIMEOUT,
            endpoint_url=self.endpoint_url,
        )
        function_env = self._function_environment(self.stack)
        self._set_environment(function_env)
        self.api = handler_for(self.app)
        self._start_workers(names, self.stack.queue_url, function_env)

    def _load_app(self) -> Any:
        from awaken_s3.agents import AgentDefinitionError, load_app

        if str(self.root) not in sys.path:
            sys.path.insert(0, str(self.root))
        try:
            return load_app(self.app_ref)
        except AgentDefinitionError as exc:
            raise HarnessError(f"app {self.app_ref}: {exc}") from exc

    def _function_environment(self, stack: Stack) -> dict[str, str]:
        """The worker function's environment: the stack's, the scripted model's, the tools'."""
        from awaken_s3.dev.resources import function_environment

        return {
            **function_environment(stack, lease_seconds=self.lease_seconds),
            # The scripted model serves every agent; any provider passes the API's checks.
            "AWAKEN_PROVIDER": "anthropic",
            "AWAKEN_MODEL": SCRIPTED_MODEL,
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL") or "INFO",
            "AWAKEN_TEST_DIR": str(self.directory),
            "AWAKEN_TEST_APP": self.app_ref,
            **self.env,
        }

    def _start_workers(
        self, names: StackNames, queue_url: str, function_env: Mapping[str, str]
    ) -> None:
        """The worker handler in local containers, fed by the stack's queue."""
        from awaken_s3.local.event_source import (
            EventSourceThread,
            FunctionConfig,
            SqsEventSource,
        )

        worker = FunctionConfig(
            handler="awaken_s3.testing.worker:lambda_handler",
            timeout=WORKER_TIMEOUT,
            name=f"{names.bucket}-worker",
            env=function_env,
            cwd=str(self.root),
        )
        self.source = SqsEventSource(
            queue_url,
            worker,
            endpoint_url=self.endpoint_url,
            region=self.region,
            max_concurrency=self.workers,
            poll_interval=0.1,
            log_dir=self.directory / "logs",
            stop_grace=2,
        )
        self._thread = EventSourceThread(self.source)
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

    def _set_environment(self, values: Mapping[str, str], remove: Sequence[str] = ()) -> None:
        for name in [*values, *remove]:
            self._saved.setdefault(name, os.environ.get(name))
        for name in remove:
            os.environ.pop(name, None)
        os.environ.update(values)

    def client(self, service: str) -> Any:
        """A boto3 client of ``service`` on moto (one per service, reused)."""
        if service not in self._clients:
            import boto3

            session: Any = boto3.Session()
            self._clients[service] = session.client(
                service, region_name=self.region, endpoint_url=self.endpoint_url
            )
        return self._clients[service]

    def checkpoint(self, stored_run_id: str) -> StreamCheckpoint | None:
        """The run's checkpoint in the stack's bucket, if it has one."""
        from awaken_s3.dev.resources import read_checkpoint

        assert self.stack is not None
        found = read_checkpoint(self.client("s3"), self.stack.names.bucket, stored_run_id)
        return found[0] if found else None
