"""A local SQS event source mapping: poll a queue, invoke a function in local containers.

:class:`SqsEventSource` does what Lambda's SQS trigger does, against moto or any SQS endpoint:
it receives up to ``batch_size`` messages (the queue's own visibility timeout applies), builds
Lambda's SQS event, invokes the function in a container (a ``lambda_host`` process; idle ones
are reused, a dead one is replaced on the next invocation: :mod:`.container_pool`), and then
deletes the records that succeeded (see :mod:`.batch_response`). A failed, timed-out or killed
invocation deletes nothing: SQS hands the records out again when their visibility timeout runs
out, counts the receive, and moves a message past the queue's ``maxReceiveCount`` to its
dead-letter queue. At most ``max_concurrency`` invocations run at once; one batch per FIFO
message group is in flight at a time (see :mod:`.fifo_groups`; the loop that receives and
dispatches batches is :mod:`.receive_loop`, its queue calls :mod:`.source_queue`).

The loop is asyncio: ``async with SqsEventSource(...) as source``. Synchronous code runs it
on a background thread with :class:`EventSourceThread`. The observation methods (``busy``,
``results``, ``containers``, ``stats``, ``kill``, ``kill_busy``) may be called from any thread.
docs/LOCAL.md lists where this differs from Lambda.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import aioboto3
from aiobotocore.config import AioConfig

from awaken_s3.local.batch_response import settle
from awaken_s3.local.container_pool import ContainerPool
from awaken_s3.local.containers import Container, FunctionConfig, HostReply, InitFailed
from awaken_s3.local.invocations import (
    BusyWorker,
    ContainerInfo,
    EventSourceStats,
    InvocationResult,
)
from awaken_s3.local.lambda_context import InvocationHeaders, function_arn
from awaken_s3.local.receive_loop import ReceiveLoop
from awaken_s3.local.source_queue import MAX_BATCH_SIZE, SourceQueue
from awaken_s3.local.sqs_events import QueueRecord, account_of, lambda_event

__all__ = [
    "BusyWorker",
    "ContainerInfo",
    "EventSourceStats",
    "EventSourceThread",
    "FunctionConfig",
    "InvocationResult",
    "QueueRecord",
    "SqsEventSource",
]

logger = logging.getLogger(__name__)


class SqsEventSource:
    """Feed ``queue_url`` to ``function``, as a Lambda SQS trigger does.

    ``wait_time`` is ReceiveMessage's long-poll wait. The default, 0 (short polls
    ``poll_interval`` apart when the queue is empty), suits moto, whose long poll spins a
    CPU for the whole wait whenever a FIFO group has a message in flight; use 20, as Lambda
    does, against SQS. ``log_dir``: each container's stdout and stderr go to a file named
    after its log stream there; None: to this process's stderr.
    """

    def __init__(
        self,
        queue_url: str,
        function: FunctionConfig,
        *,
        batch_size: int = 1,
        max_concurrency: int = 2,
        wait_time: int = 0,
        poll_interval: float = 0.2,
        endpoint_url: str | None = None,
        region: str | None = None,
        report_batch_item_failures: bool = True,
        on_invocation: Callable[[InvocationResult], None] | None = None,
        log_dir: Path | None = None,
        stop_grace: float = 10.0,
        provisioned: int = 0,
    ) -> None:
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise ValueError(f"batch_size must be 1..{MAX_BATCH_SIZE}")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if provisioned < 0:
            raise ValueError("provisioned must be at least 0")
        if not 0 <= wait_time <= 20:
            raise ValueError("wait_time must be 0..20 seconds")
        self.queue_url = queue_url
        self.function = function
        self.batch_size = batch_size
        self.max_concurrency = max_concurrency
        self.wait_time = wait_time
        self.poll_interval = poll_interval
        self.endpoint_url = endpoint_url
        self.region = (
            region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        ) or "us-east-1"
        self.report_batch_item_failures = report_batch_item_failures
        self.on_invocation = on_invocation
        self.log_dir = log_dir
        self.stop_grace = stop_grace
        #: containers kept initialized ahead of invocations (Lambda's provisioned
        #: concurrency; more than ``max_concurrency`` keeps spares, as the warm environments
        #: of an earlier burst): a dead one is replaced in the background, so an invocation
        #: after a crash does not wait for a new container's init
        self.provisioned = provisioned
        #: set by start(): the queue's ARN, whether it is FIFO, the function's ARN
        self.queue_arn = ""
        self.fifo = False
        self.function_arn = ""

        self._pool = ContainerPool(
            function, region=self.region, log_dir=log_dir, provisioned=provisioned
        )
        self._lock = threading.Lock()
        self._busy: dict[str, BusyWorker] = {}
        self._results: list[InvocationResult] = []
        self._stopped = False
        self._resources = contextlib.AsyncExitStack()
        #: set by start()
        self._queue: SourceQueue | None = None
        self._receiver: ReceiveLoop | None = None

    # -- lifecycle

    async def start(self) -> None:
        if self._receiver is not None:
            raise RuntimeError("this event source was already started")
        config = AioConfig(
            retries={"mode": "standard", "total_max_attempts": 3},
            read_timeout=self.wait_time + 30,
        )
        try:
            sqs = await self._resources.enter_async_context(
                aioboto3.Session().client(
                    "sqs", region_name=self.region, endpoint_url=self.endpoint_url, config=config
                )
            )
            answer = await sqs.get_queue_attributes(
                QueueUrl=self.queue_url, AttributeNames=["QueueArn", "FifoQueue"]
            )
            attributes = answer.get("Attributes", {})
            self.queue_arn = attributes["QueueArn"]
            account = account_of(self.queue_arn)
        except BaseException:
            await self._resources.aclose()
            raise
        self.fifo = attributes.get("FifoQueue") == "true"
        # Records carry the queue's region, and the function lives where its trigger does.
        self.region = self.queue_arn.split(":")[3] or self.region
        self.function_arn = function_arn(self.region, account, self.function.name)
        self._queue = SourceQueue(sqs, self.queue_url, queue_arn=self.queue_arn, region=self.region)
        self._pool.region = self.region
        self._pool.start_provisioning()
        self._receiver = ReceiveLoop(
            self._queue,
            self._invoke,
            self._pool.kill_all,
            batch_size=self.batch_size,
            max_concurrency=self.max_concurrency,
            wait_time=self.wait_time,
            poll_interval=self.poll_interval,
        )
        self._receiver.start()

    async def stop(self, *, grace: float | None = None) -> None:
        """Stop polling, give busy invocations ``grace`` seconds (default ``stop_grace``) to
        finish, then kill them; kill every container and reap it. Held and just-received
        records are made visible again at once. Safe to call twice."""
        if self._receiver is None or self._stopped:
            return
        self._receiver.request_stop()
        try:
            await self._pool.stop_provisioning()
            await self._receiver.drain(self.stop_grace if grace is None else grace)
        finally:
            await self._pool.close()
            await self._resources.aclose()
            self._stopped = True

    async def __aenter__(self) -> SqsEventSource:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Leaving on an exception: nothing is worth waiting for.
        await self.stop(grace=0 if exc_type is not None else None)

    # -- observation and faults (any thread)

    def busy(self) -> list[BusyWorker]:
        with self._lock:
            return sorted(self._busy.values(), key=lambda w: w.started_at)

    def results(self) -> list[InvocationResult]:
        with self._lock:
            return list(self._results)

    def stats(self) -> EventSourceStats:
        return EventSourceStats.of(self.results())

    def containers(self) -> list[ContainerInfo]:
        return self._pool.infos()

    def kill(self, pid: int) -> bool:
        """SIGKILL the container ``pid`` (busy or idle); False if it is not one of this
        source's running containers. Its invocation ends with outcome "killed"."""
        return self._pool.kill(pid)

    def recycle(self) -> list[int]:
        """SIGKILL every container, busy or idle, so that the next invocations start new ones
        (new code: ``awaken-s3 dev --reload``). A killed invocation's records come back as a
        killed worker's do. Returns the pids killed."""
        return [pid for pid in self._pool.pids() if self.kill(pid)]

    def freeze(self, pid: int, frozen: bool = True) -> bool:
        """SIGSTOP the container ``pid`` (``frozen=False``: SIGCONT it); False if it is not one
        of this source's running containers. A frozen container's invocation still ends at
        its deadline (the container is then killed, outcome "timeout")."""
        return self._pool.freeze(pid, frozen)

    def kill_busy(self, predicate: Callable[[BusyWorker], bool] | None = None) -> list[int]:
        """SIGKILL every busy container whose worker matches ``predicate`` (all if None);
        returns the pids killed."""
        victims = [w.pid for w in self.busy() if predicate is None or predicate(w)]
        return [pid for pid in victims if self.kill(pid)]

    @property
    def _stopping(self) -> bool:
        return self._receiver is not None and self._receiver.stopping

    # -- invocations

    async def _invoke(self, records: list[QueueRecord]) -> None:
        request_id = str(uuid.uuid4())
        started_at, clock = time.time(), time.monotonic()
        container: Container | None = None
        cold = False
        try:
            container, cold = await self._pool.check_out()
        except InitFailed as exc:
            reply = HostReply("error", error=str(exc))
        else:
            reply = await self._run_in(container, request_id, records)
        settlement = settle(
            [r.message_id for r in records],
            reply.outcome,
            reply.response,
            report_batch_item_failures=self.report_batch_item_failures,
        )
        assert self._queue is not None
        deleted = await self._queue.delete(records, settlement.delete)
        result = InvocationResult(
            request_id=request_id,
            records=tuple(records),
            outcome=reply.outcome,
            response=reply.response,
            error=reply.error or settlement.problem,
            deleted=deleted,
            retried=tuple(
                i for i in dict.fromkeys(r.message_id for r in records) if i not in deleted
            ),
            pid=container.pid if container is not None else None,
            log_stream_name=container.log_stream_name if container is not None else None,
            cold_start=cold,
            started_at=started_at,
            duration=time.monotonic() - clock,
        )
        with self._lock:
            self._results.append(result)
        if self.on_invocation is not None:
            try:
                self.on_invocation(result)
            except Exception:
                logger.exception("on_invocation raised")

    async def _run_in(
        self, container: Container, request_id: str, records: list[QueueRecord]
    ) -> HostReply:
        started_at = time.time()
        deadline = started_at + self.function.timeout
        worker = BusyWorker(
            pid=container.pid,
            request_id=request_id,
            log_stream_name=container.log_stream_name,
            records=tuple(records),
            started_at=started_at,
            deadline_at=deadline,
        )
        headers = InvocationHeaders(request_id, self.function_arn, int(deadline * 1000))
        with self._lock:
            self._busy[request_id] = worker
        try:
            reply = await container.invoke(lambda_event(records), headers)
        except BaseException:
            await self._pool.discard(container)
            raise
        finally:
            with self._lock:
                self._busy.pop(request_id, None)
        await self._pool.check_in(container, keep=not self._stopping)
        return reply


class EventSourceThread:
    """Run an :class:`SqsEventSource` on its own event loop in a background thread, for
    synchronous callers: ``with EventSourceThread(source) as running: ...``."""

    def __init__(self, source: SqsEventSource, *, start_timeout: float = 60.0) -> None:
        self.source = source
        self.start_timeout = start_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> SqsEventSource:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name="awaken-sqs-event-source", daemon=True
        )
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.source.start(), loop).result(self.start_timeout)
        except BaseException:
            self._stop_loop()
            raise
        return self.source

    def stop(self, *, grace: float | None = None) -> None:
        if self._loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.source.stop(grace=grace), self._loop).result()
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def __enter__(self) -> SqsEventSource:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(grace=0 if exc_type is not None else None)
