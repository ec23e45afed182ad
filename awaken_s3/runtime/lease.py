"""A run's lease as one invocation holds it: the claim, its renewal, and the writes that end it.

:class:`LeaseKeeper` renews the lease in the background; :class:`RunLease` is what the run
loop's driver holds: it claims, keeps renewing (calling the heartbeat after the claim and each
renewal), confirms the lease against the run record, and releases or finishes the run, each
time stopping the renewals first so none races the write that gives the lease up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads.base import RunStore
from awaken_s3.threads.errors import LeaseLost, RunNotFound, ThreadStoreError
from awaken_s3.threads.models import RunState, RunStatus
from awaken_s3.threads.rules import holds_lease

log = logging.getLogger("awaken_s3.lease")
T = TypeVar("T")


class LeaseKeeper:
    """Renews ``run_id``'s lease every ``interval`` seconds in a background task.

    A renewal that finds another epoch sets :attr:`lost` and stops: the loop checks it between
    steps, and the storage fences the worker anyway (commit, checkpoint, tool claim). A
    renewal that finds the run cancelled (the renewal answers the run as stored) sets
    :attr:`cancelled`: the loop abandons the model call or tools in flight, so a cancel stops
    a worker within one renewal interval at the latest (a streaming one sooner: see
    :meth:`RunLease.confirm`). A transient renewal failure is logged and
    retried at the next tick; the lease is sized to survive a few missed renewals.
    """

    def __init__(
        self,
        store: RunStore,
        *,
        run_id: str,
        worker: str,
        epoch: int,
        lease_seconds: float,
        interval: float | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_renewed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.worker = worker
        self.epoch = epoch
        self.lease_seconds = lease_seconds
        self.interval = interval if interval is not None else lease_seconds / 3
        self.renewals = 0
        self.lost = asyncio.Event()
        self.cancelled = asyncio.Event()
        self._sleep = sleep
        #: called after each successful renewal (the worker extends its queue record's
        #: visibility with the lease); its failures are the callee's to log
        self._on_renewed = on_renewed
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self.interval > 0:
            self._task = asyncio.create_task(self._run(), name=f"lease-{self.run_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def renew_now(self) -> bool:
        try:
            run = await self.store.renew_lease(
                self.run_id, worker=self.worker, epoch=self.epoch, lease_seconds=self.lease_seconds
            )
        except (LeaseLost, RunNotFound) as exc:
            log.warning("run %s: lease lost at epoch %d: %s", self.run_id, self.epoch, exc)
            self.lost.set()
            return False
        except ThreadStoreError as exc:
            log.warning("run %s: lease renewal failed, will retry: %s", self.run_id, exc)
            return True
        self.renewals += 1
        if run.status == RunStatus.CANCELLED:
            log.info("run %s: cancelled; the work in flight stops", self.run_id)
            self.cancelled.set()
        if self._on_renewed is not None:
            await self._on_renewed()
        return True

    async def while_held(self, work: Awaitable[T]) -> T | None:
        """Await ``work``, abandoning it (None) as soon as a renewal finds the lease gone or
        the run cancelled: a model call that can never be committed is not worth paying for,
        and a tool call that can never be recorded is cancelled (its outcome is the next
        epoch's to judge)."""
        work_task = asyncio.ensure_future(work)
        lost_task = asyncio.ensure_future(self.lost.wait())
        cancel_task = asyncio.ensure_future(self.cancelled.wait())
        try:
            await asyncio.wait(
                {work_task, lost_task, cancel_task}, return_when=asyncio.FIRST_COMPLETED
            )
            if work_task.done():
                return work_task.result()
            return None
        finally:
            for task in (work_task, lost_task, cancel_task):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    async def _run(self) -> None:
        while True:
            await self._sleep(self.interval)
            if not await self.renew_now():
                return

    async def __aenter__(self) -> LeaseKeeper:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


#: called after the claim and after every lease renewal (the worker keeps its queue record's
#: visibility in step with the lease); failures are logged and never end the run
Heartbeat = Callable[[], Awaitable[None]]


async def _beat(heartbeat: Heartbeat | None, run_id: str) -> None:
    if heartbeat is None:
        return
    try:
        await heartbeat()
    except Exception as exc:  # the lease, not the queue record, is the authority
        log.warning("run %s: heartbeat failed: %s", run_id, exc)


class RunLease:
    """One invocation's lease on ``run_id`` (see the module's docstring)."""

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        *,
        worker: str,
        lease_seconds: float,
        renew_every: float | None,
        clock: Callable[[], float],
        heartbeat: Heartbeat | None = None,
    ) -> None:
        self.store, self.run_id, self.worker = store, run_id, worker
        self.lease_seconds, self.renew_every = lease_seconds, renew_every
        self.clock, self.heartbeat = clock, heartbeat
        self.epoch = 0
        #: the ``clock`` reading just after the claim
        self.claimed_at = 0.0
        self.keeper: LeaseKeeper | None = None

    async def claim(self) -> RunState:
        """Claim the run and start renewing; raises ``LeaseUnavailable``."""
        run = await self.store.claim_run(
            self.run_id, worker=self.worker, lease_seconds=self.lease_seconds
        )
        self.epoch, self.claimed_at = run.lease.epoch, self.clock()
        await _beat(self.heartbeat, self.run_id)
        heartbeat = self.heartbeat
        self.keeper = LeaseKeeper(
            self.store,
            run_id=self.run_id,
            worker=self.worker,
            epoch=self.epoch,
            lease_seconds=self.lease_seconds,
            interval=self.renew_every,
            on_renewed=(lambda: _beat(heartbeat, self.run_id)) if heartbeat else None,
        )
        self.keeper.start()
        return run

    @property
    def lost(self) -> bool:
        """A renewal found the lease gone."""
        return self.keeper is not None and self.keeper.lost.is_set()

    @property
    def cancelled(self) -> bool:
        """A renewal found the run cancelled (the work in flight was abandoned for it)."""
        return self.keeper is not None and self.keeper.cancelled.is_set()

    async def while_held(self, work: Awaitable[T]) -> T | None:
        assert self.keeper is not None, "claimed first"
        return await self.keeper.while_held(work)

    async def stop_renewing(self) -> None:
        if self.keeper is not None:
            await self.keeper.stop()

    async def confirm(self) -> bool:
        """The run record's word: does this epoch still hold a live lease, for a run that goes
        on? A run found cancelled is answered no, and the work in flight stops at once, as
        when a renewal finds it: the checkpoint writer asks this after a lost condition, and
        the API's cancel changes the checkpoint's version for exactly that (so a cancel stops
        the tokens within a put interval, not a renewal interval)."""
        run = await self.store.get_run(self.run_id)
        if run.status == RunStatus.CANCELLED:
            if self.keeper is not None and not self.keeper.cancelled.is_set():
                log.info("run %s: found cancelled; the work in flight stops", self.run_id)
                self.keeper.cancelled.set()
            return False
        return holds_lease(run, self.worker, self.epoch) and run.lease.lease_until > self.clock()

    async def release(self, *, idle_suspensions: int = 0) -> RunState:
        """Hand the run over; raises ``LeaseLost``."""
        await self.stop_renewing()
        return await self.store.release_lease(
            self.run_id, worker=self.worker, epoch=self.epoch, idle_suspensions=idle_suspensions
        )

    async def finish(self, status: RunStatus, error: ClassifiedError | None) -> RunState:
        """End the run; raises ``LeaseLost``."""
        await self.stop_renewing()
        return await self.store.finish_run(
            self.run_id, worker=self.worker, epoch=self.epoch, status=status, error=error
        )

    async def release_after_crash(self) -> None:
        """Let the next invocation take over at once (best effort)."""
        try:
            await self.release()
        except (ThreadStoreError, LeaseLost) as exc:
            log.warning("run %s: could not release the lease: %s", self.run_id, exc)
