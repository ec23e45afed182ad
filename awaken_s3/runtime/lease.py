"""Keeping a run lease alive while the loop works."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from awaken_s3.threads.base import RunStore
from awaken_s3.threads.errors import LeaseLost, RunNotFound, ThreadStoreError
from awaken_s3.threads.models import RunStatus

log = logging.getLogger("awaken_s3.lease")


class LeaseKeeper:
    """Renews ``run_id``'s lease every ``interval`` seconds in a background task.

    A renewal that finds another epoch sets :attr:`lost` and stops: the loop checks it between
    steps, and the storage fences the worker anyway (commit, checkpoint, tool claim). A
    renewal that finds the run cancelled (the renewal answers the run as stored) sets
    :attr:`cancelled`: the loop abandons the model call or tools in flight, so a cancel stops
    a streaming worker within one renewal interval. A transient renewal failure is logged and
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
