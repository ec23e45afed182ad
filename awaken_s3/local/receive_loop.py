"""The event source's receive and dispatch loop: which batch runs when.

:class:`ReceiveLoop` receives up to ``batch_size`` records whenever one of ``max_concurrency``
slots is free, admits them through the FIFO gate (one batch per message group in flight, see
:mod:`.fifo_groups`) and runs each batch on its slot as a chain: when the batch ends, the
group's held records run next on the same slot. Running a batch (the invocation, its
settlement) is the caller's ``invoke``. Stopping lets a ReceiveMessage in flight finish, gives
the chains a grace period, kills what still runs and makes every record it holds visible again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.local.fifo_groups import GroupGate
from awaken_s3.local.source_queue import SourceQueue
from awaken_s3.local.sqs_events import QueueRecord

logger = logging.getLogger(__name__)

#: pause after a failed ReceiveMessage before the next one
_RECEIVE_BACKOFF = 1.0


class ReceiveLoop:
    """Feed ``queue``'s records to ``invoke``, at most ``max_concurrency`` batches at once;
    ``kill_all`` kills every container when the stop's grace runs out."""

    def __init__(
        self,
        queue: SourceQueue,
        invoke: Callable[[list[QueueRecord]], Awaitable[None]],
        kill_all: Callable[[], None],
        *,
        batch_size: int,
        max_concurrency: int,
        wait_time: int,
        poll_interval: float,
    ) -> None:
        self.queue = queue
        self.invoke = invoke
        self.kill_all = kill_all
        self.batch_size = batch_size
        self.wait_time = wait_time
        self.poll_interval = poll_interval
        #: set by request_stop(): no new receive or batch starts
        self.stopping = False
        self._gate = GroupGate()
        self._chains: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(max_concurrency)
        self._poller: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._poller = asyncio.create_task(self._poll(), name=f"poll {self.queue.queue_url}")

    def request_stop(self) -> None:
        self.stopping = True

    async def drain(self, grace: float) -> None:
        """After :meth:`request_stop`: end the loop, give the running batches ``grace``
        seconds, then kill them; release the records held back."""
        await self._stop_poller()
        await self._finish_chains(grace)
        await self._release(self._gate.drain())

    async def _poll(self) -> None:
        while not self.stopping:
            await self._slots.acquire()
            dispatched = False
            try:
                batch = self._gate.take_ready(self.batch_size)
                if not batch:
                    records = await self.queue.receive(self.batch_size, self.wait_time)
                    if self.stopping:
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

    async def _stop_poller(self) -> None:
        poller = self._poller
        assert poller is not None
        if self.queue.receiving:
            # Cancelling a ReceiveMessage in flight would lose its answer: the messages would
            # sit invisible for a whole visibility timeout. Let it finish and release them.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(poller), self.wait_time + 15)
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller

    def _dispatch(self, batch: list[QueueRecord]) -> None:
        """Run ``batch`` (and then the group's held records) on the slot the caller holds."""
        task = asyncio.create_task(self._run_chain(batch))
        self._chains.add(task)
        task.add_done_callback(self._chains.discard)

    async def _run_chain(self, batch: list[QueueRecord]) -> None:
        try:
            while batch:
                try:
                    await self.invoke(batch)
                except Exception:
                    logger.exception("an invocation failed inside the event source")
                finally:
                    self._gate.release(batch)
                batch = [] if self.stopping else self._gate.take_ready(self.batch_size)
        finally:
            self._slots.release()

    async def _finish_chains(self, grace: float) -> None:
        if not self._chains:
            return
        _, pending = await asyncio.wait(set(self._chains), timeout=grace)
        if not pending:
            return
        self.kill_all()
        # A killed container's invocation ends as soon as its pipe closes.
        _, pending = await asyncio.wait(pending, timeout=30)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _release(self, records: list[QueueRecord]) -> None:
        if records:
            await self.queue.release(records)
