"""The sweeper's reads and writes, over a backend's primitives (one algorithm for every
backend: :mod:`awaken_s3.threads.backend`)."""

from __future__ import annotations

from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import codec, rules, writes
from awaken_s3.threads.backend import StoreIO
from awaken_s3.threads.errors import RunChanged
from awaken_s3.threads.models import RunState


class SweepOperations(StoreIO):
    """The :class:`~awaken_s3.threads.base.RunSweepStore` operations (``get_run`` is the
    run store's)."""

    async def stalled_runs(self, *, now: float, limit: int = 100) -> list[str]:
        run_ids: list[str] = []
        for shard in range(rules.SWEEP_SHARDS):
            if len(run_ids) >= limit:
                break
            query = writes.stalled(str(shard), now=now, limit=limit - len(run_ids))
            items = await self._query(query, action="query of the sweep index")
            run_ids.extend(codec.run_id_of(item) for item in items)
        return run_ids

    async def mark_rescued(
        self, run: RunState, *, rescues: int, fruitless: int, now: float, next_in: float
    ) -> RunState:
        rescue = writes.rescue(run, rescues=rescues, fruitless=fruitless, now=now, next_in=next_in)
        return await self._sweep_write(run, rescue)

    async def abandon_run(self, run: RunState, *, error: ClassifiedError, now: float) -> RunState:
        return await self._sweep_write(run, writes.abandon(run, error=error, now=now))

    async def _sweep_write(self, run: RunState, update: writes.Update) -> RunState:
        written = await self._write(update, action=f"sweep of run {run.run_id}")
        if not written.applied or written.item is None:
            raise RunChanged(f"run {run.run_id} changed since the sweeper read it")
        return await self._run_of(written.item)
