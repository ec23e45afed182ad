"""A local SQS event source mapping: poll a queue, invoke a function in local containers.

:class:`SqsEventSource` does what Lambda's SQS trigger does, against moto or any SQS endpoint:
it receives up to ``batch_size`` messages (the queue's own visibility timeout applies), builds
Lambda's SQS event, invokes the function in a container (a ``lambda_host`` process; idle ones
are reused, a dead one is replaced on the next invocation), and then deletes the records that
succeeded (see :mod:`.batch_response`). A failed, timed-out or killed invocation deletes
nothing: SQS hands the records out again when their visibility timeout runs out, counts the
receive, and moves a message past the queue's ``maxReceiveCount`` to its dead-letter queue. At
most ``max_concurrency`` invocations run at once; one batch per FIFO message group is in
flight at a time (see :mod:`.fifo_groups`).

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
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import aioboto3
from aiobotocore.config import AioConfig
from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.local.batch_response import settle
from awaken_s3.local.containers import Container, FunctionConfig, HostReply, InitFailed
from awaken_s3.local.fifo_groups import GroupGate
from awaken_s3.local.invocations import (
    BusyWorker,
    ContainerInfo,
    EventSourceStats,
    InvocationResult,
)
from awaken_s3.local.lambda_context import InvocationHeaders, function_arn
from awaken_s3.local.sqs_events import QueueRecord, account_of, lambda_event, queue_records

if TYPE_CHECKING:
    from types_aiobotocore_sqs import SQSClient

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

#: SQS answers at most 10 messages per ReceiveMessage
MAX_BATCH_SIZE = 10
#: pause after a failed ReceiveMessage before the next one
_RECEIVE_BACKOFF = 1.0


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

        self._lock = threading.Lock()
        self._busy: dict[str, BusyWorker] = {}
        self._results: list[InvocationResult] = []
        self._containers: dict[int, Container] = {}
        self._idle: list[Container] = []
        self._gate = GroupGate()
        self._chains: set[asyncio.Task[None]] = set()
        self._slots: asyncio.Semaphore | None = None
        self._poller: asyncio.Task[None] | None = None
        self._provisioner: asyncio.Task[None] | None = None
        self._spawning = 0
        self._receiving = False
        self._stopping = False
        self._stopped = False
        self._resources = contextlib.AsyncExitStack()
        self._sqs: SQSClient | None = None

    # -- lifecycle

    async def start(self) -> None:
        if self._poller is not None:
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
            self._sqs = sqs
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
        self._slots = asyncio.Semaphore(self.max_concurrency)
        if self.provisioned:
            self._provisioner = asyncio.create_task(self._provision(), name="provisioned")
        self._poller = asyncio.create_task(self._poll(), name=f"poll {self.queue_url}")

    async def stop(self, *, grace: float | None = None) -> None:
        """Stop polling, give busy invocations ``grace`` seconds (default ``stop_grace``) to
        finish, then kill them; kill every container and reap it. Held and just-received
        records are made visible again at once. Safe to call twice."""
        if self._poller is None or self._stopped:
            return
        self._stopping = True
        try:
            if self._provisioner is not None:
                self._provisioner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._provisioner
            await self._stop_poller()
            await self._finish_chains(self.stop_grace if grace is None else grace)
            await self._release(self._gate.drain())
        finally:
            for container in list(self._containers.values()):
                await self._discard(container)
            self._idle.clear()
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
        with self._lock:
            idle = {c.pid for c in self._idle}
            return [
                ContainerInfo(
                    pid=c.pid,
                    log_stream_name=c.log_stream_name,
                    busy=c.pid not in idle,
                    invocations=c.invocations,
                )
                for c in self._containers.values()
            ]

    def kill(self, pid: int) -> bool:
        """SIGKILL the container ``pid`` (busy or idle); False if it is not one of this
        source's running containers. Its invocation ends with outcome "killed"."""
        with self._lock:
            container = self._containers.get(pid)
        return container.kill() if container is not None else False

    def recycle(self) -> list[int]:
        """SIGKILL every container, busy or idle, so that the next invocations start new ones
        (new code: ``awaken-s3 dev --reload``). A killed invocation's records come back as a
        killed worker's do. Returns the pids killed."""
        with self._lock:
            pids = list(self._containers)
        return [pid for pid in pids if self.kill(pid)]

    def freeze(self, pid: int, frozen: bool = True) -> bool:
        """SIGSTOP the container ``pid`` (``frozen=False``: SIGCONT it); False if it is not one
        of this source's running containers. A frozen container's invocation still ends at
        its deadline (the container is then killed, outcome "timeout")."""
        with self._lock:
            container = self._containers.get(pid)
        return container.freeze(frozen) if container is not None else False

    def kill_busy(self, predicate: Callable[[BusyWorker], bool] | None = None) -> list[int]:
        """SIGKILL every busy container whose worker matches ``predicate`` (all if None);
        returns the pids killed."""
        victims = [w.pid for w in self.busy() if predicate is None or predicate(w)]
        return [pid for pid in victims if self.kill(pid)]

    # -- polling

    async def _poll(self) -> None:
        assert self._slots is not None
        while not self._stopping:
            await self._slots.acquire()
            dispatched = False
            try:
                batch = self._gate.take_ready(self.batch_size)
                if not batch:
                    records = await self._receive()
                    if self._stopping:
                        await self._release(records)
                        return
                    batch = self._gate.admit(records)
                    if not records and self.wait_time == 0:
                        await asyncio.sleep(self.poll_interval)
                if batch:
                    self._dispatch(batch)
                    dispatched = True
            except (ClientError, BotoCoreError) as exc:
                logger.warning("ReceiveMessage failed: %s", exc)
                await asyncio.sleep(_RECEIVE_BACKOFF)
            except Exception:
                logger.exception("the event source's poll loop failed; polling on")
                await asyncio.sleep(_RECEIVE_BACKOFF)
            finally:
                if not dispatched:
                    self._slots.release()

    async def _receive(self) -> list[QueueRecord]:
        assert self._sqs is not None
        self._receiving = True
        try:
            answer = await self._sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=self.batch_size,
                WaitTimeSeconds=self.wait_time,
                # Both spellings: MessageSystemAttributeNames replaced AttributeNames, and an
                # older endpoint may know only the first.
                AttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
        finally:
            self._receiving = False
        return queue_records(
            answer.get("Messages", []), queue_arn=self.queue_arn, region=self.region
        )

    async def _stop_poller(self) -> None:
        poller = self._poller
        assert poller is not None
        if self._receiving:
            # Cancelling a ReceiveMessage in flight would lose its answer: the messages would
            # sit invisible for a whole visibility timeout. Let it finish and release them.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(poller), self.wait_time + 15)
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller

    # -- invocations

    def _dispatch(self, batch: list[QueueRecord]) -> None:
        """Run ``batch`` (and then the group's held records) on the slot the caller holds."""
        task = asyncio.create_task(self._run_chain(batch))
        self._chains.add(task)
        task.add_done_callback(self._chains.discard)

    async def _run_chain(self, batch: list[QueueRecord]) -> None:
        assert self._slots is not None
        try:
            while batch:
                try:
                    await self._invoke(batch)
                except Exception:
                    logger.exception("an invocation failed inside the event source")
                finally:
                    self._gate.release(batch)
                batch = [] if self._stopping else self._gate.take_ready(self.batch_size)
        finally:
            self._slots.release()

    async def _invoke(self, records: list[QueueRecord]) -> None:
        request_id = str(uuid.uuid4())
        started_at, clock = time.time(), time.monotonic()
        container: Container | None = None
        cold = False
        try:
            container, cold = await self._checkout()
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
        deleted = await self._delete(records, settlement.delete)
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
            await self._discard(container)
            raise
        finally:
            with self._lock:
                self._busy.pop(request_id, None)
        if container.alive and not self._stopping:
            with self._lock:
                self._idle.append(container)
        else:
            await self._discard(container)
        return reply

    async def _checkout(self) -> tuple[Container, bool]:
        """An idle container (warm), or a new one (cold)."""
        while True:
            with self._lock:
                container = self._idle.pop() if self._idle else None
            if container is None:
                break
            if container.alive:
                return container, False
            await self._discard(container)
        return await self._spawn(), True

    async def _spawn(self) -> Container:
        """A new, initialized container (not idle yet: the caller decides)."""
        self._spawning += 1
        try:
            container = await Container.spawn(
                self.function, region=self.region, log_dir=self.log_dir
            )
            with self._lock:
                self._containers[container.pid] = container
            try:
                await container.ready()
            except BaseException:
                await self._discard(container)
                raise
            return container
        finally:
            self._spawning -= 1

    async def _provision(self) -> None:
        """Keep ``provisioned`` containers initialized, replacing those that died."""
        while not self._stopping:
            with self._lock:
                dead = [c for c in self._idle if not c.alive]
            for container in dead:  # an idle one that died (a busy one's invocation reaps it)
                await self._discard(container)
            with self._lock:
                alive = sum(1 for c in self._containers.values() if c.alive)
                missing = self.provisioned - alive - self._spawning
            if missing > 0:
                try:
                    container = await self._spawn()
                except InitFailed as exc:
                    logger.warning("a provisioned container failed its init: %s", exc)
                    await asyncio.sleep(_RECEIVE_BACKOFF)
                    continue
                with self._lock:
                    self._idle.insert(0, container)  # the poller takes the warmest first
                continue
            await asyncio.sleep(0.05)

    async def _discard(self, container: Container) -> None:
        with self._lock:
            self._containers.pop(container.pid, None)
            if container in self._idle:
                self._idle.remove(container)
        await container.close()

    async def _finish_chains(self, grace: float) -> None:
        if not self._chains:
            return
        _, pending = await asyncio.wait(set(self._chains), timeout=grace)
        if not pending:
            return
        with self._lock:
            running = list(self._containers.values())
        for container in running:
            container.kill()
        # A killed container's invocation ends as soon as its pipe closes.
        _, pending = await asyncio.wait(pending, timeout=30)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    # -- queue writes

    async def _delete(self, records: Sequence[QueueRecord], ids: Sequence[str]) -> tuple[str, ...]:
        wanted = [r for r in records if r.message_id in set(ids)]
        if not wanted:
            return ()
        assert self._sqs is not None
        try:
            answer = await self._sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": r.receipt_handle} for i, r in enumerate(wanted)
                ],
            )
        except (ClientError, BotoCoreError) as exc:
            logger.warning("DeleteMessageBatch failed; the records will come back: %s", exc)
            return ()
        failed = {int(f["Id"]) for f in answer.get("Failed", [])}
        for entry in answer.get("Failed", []):
            logger.warning("could not delete a record: %s", entry.get("Message"))
        return tuple(dict.fromkeys(r.message_id for i, r in enumerate(wanted) if i not in failed))

    async def _release(self, records: Sequence[QueueRecord]) -> None:
        """Make received records that will not be invoked visible again now."""
        if not records or self._sqs is None:
            return
        for start in range(0, len(records), MAX_BATCH_SIZE):
            chunk = records[start : start + MAX_BATCH_SIZE]
            try:
                await self._sqs.change_message_visibility_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": r.receipt_handle, "VisibilityTimeout": 0}
                        for i, r in enumerate(chunk)
                    ],
                )
            except (ClientError, BotoCoreError) as exc:
                logger.warning("could not release received records: %s", exc)


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
