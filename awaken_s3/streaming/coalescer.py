"""Checkpoint writers: the coalescing writer the runner uses, and a no-op one.

The coalescing writer keeps the stream off the S3 path:

* :meth:`CoalescingCheckpointWriter.offer` is synchronous and never awaits; a
  put runs in a background task, at most one at a time.
* The snapshot is taken when a put *starts*, so whatever arrived while a put
  was in flight goes out with the next one: the latest partial wins and
  intermediate states are skipped.
* A put is due when ``min_interval`` seconds have passed since the last one
  started, when ``min_bytes`` characters of content arrived since, or at a
  tool-call boundary; a timer covers a quiet stream that stops offering.
* :meth:`flush` is the final awaited flush (interruption, deadline).

Fencing: every put carries the last version this writer saw. A lost condition
(:class:`CheckpointFenced`) stops all further writes and sets :attr:`fenced`,
unless it is explained without another live owner: the writer re-reads the object
and follows :func:`~awaken_s3.streaming.fence.explain_fence` (adopt an older
epoch's or its own version, create what is gone, or, on the run record's word
through the caller's ``confirm_owner``, repair what is wrong), at most
:data:`MAX_FENCE_REREADS` times in a row without a put landing.
Any other store error is logged on ``awaken_s3.checkpoint``, counted, and
ignored: checkpoint faults never decide a run's lifecycle.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from awaken_s3.errors import CheckpointFenced, CheckpointTooLarge, StreamCheckpointError
from awaken_s3.models import StreamCheckpoint, encode_checkpoint
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.cleanup import read_checkpoint
from awaken_s3.streaming.fate import Corrupt, Unreadable
from awaken_s3.streaming.fence import (
    Adopt,
    AskOwner,
    Create,
    FenceVerdict,
    Repair,
    explain_fence,
    is_cancel_mark,
)
from awaken_s3.streaming.outcome import CheckpointStats
from awaken_s3.streaming.turn_request import OwnerCheck, ask_owner

log = logging.getLogger("awaken_s3.checkpoint")

Clock = Callable[[], float]
#: re-reads a writer may do in a row (without a put landing) to explain a lost condition
MAX_FENCE_REREADS = 3


@dataclass(frozen=True)
class CheckpointPolicy:
    enabled: bool = True
    #: a put is due this long after the previous one started
    min_interval: float = 1.0
    #: ... or after this many characters of new text / tool arguments
    min_bytes: int = 4096
    #: upper bound on a final awaited flush (interruption, deadline, completion)
    final_flush_timeout: float = 5.0

    def __post_init__(self) -> None:
        if self.min_interval < 0 or self.min_bytes < 0 or self.final_flush_timeout <= 0:
            raise ValueError("checkpoint policy values must be positive")


class StatsCounter:
    def __init__(self) -> None:
        self.puts = 0
        self.failures = 0
        self.fenced = 0
        self.bytes = 0
        self.load_failures = 0
        self.repaired = 0
        self.newer_schema = 0

    def frozen(self) -> CheckpointStats:
        return CheckpointStats(
            puts=self.puts,
            failures=self.failures,
            fenced=self.fenced,
            bytes=self.bytes,
            load_failures=self.load_failures,
            repaired=self.repaired,
            newer_schema=self.newer_schema,
        )


class CheckpointWriter(Protocol):
    """What the runner needs from a writer (the benchmark plugs in an inline one)."""

    version: str | None
    fenced: bool
    stats: StatsCounter

    def offer(self, boundary: bool) -> Awaitable[None] | None:
        """New content arrived; an awaitable when the caller must wait for a put."""
        ...

    async def write_now(self) -> None:
        """An immediate awaited put of the current snapshot (e.g. on resume)."""
        ...

    async def flush(self, *, force: bool = False) -> None:
        """Final flush: wait for the put in flight, then write what is unsaved."""
        ...

    async def settle(self) -> None:
        """Wait for the put in flight without starting a new one."""
        ...

    async def aclose(self) -> None:
        """No put starts after this; the one in flight is awaited (bounded). A put still in
        flight after that is :attr:`in_flight`, for the caller to await before it judges
        what is stored."""
        ...


@dataclass
class WriterContext:
    """What a writer factory gets to build a writer for one turn."""

    store: StreamCheckpointStore
    run_id: str
    epoch: int
    writer_id: str
    snapshot: Callable[[], StreamCheckpoint]
    progress: Callable[[], int]
    version: str | None
    version_known: bool
    policy: CheckpointPolicy
    clock: Clock
    stats: StatsCounter
    confirm_owner: OwnerCheck | None = None
    #: the put interval now, when it may change during the turn (a run someone follows live
    #: is checkpointed at the push cadence); None from it, or no callable: the policy's
    interval: Callable[[], float | None] | None = None


WriterFactory = Callable[[WriterContext], CheckpointWriter]


class NullCheckpointWriter:
    """Checkpointing switched off."""

    def __init__(self, ctx: WriterContext) -> None:
        self.version = ctx.version
        self.fenced = False
        self.stats = ctx.stats

    def offer(self, boundary: bool) -> None:
        return None

    async def write_now(self) -> None:
        return None

    async def flush(self, *, force: bool = False) -> None:
        return None

    async def settle(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class CoalescingCheckpointWriter:
    def __init__(self, ctx: WriterContext) -> None:
        self._ctx = ctx
        self._store = ctx.store
        self._policy = ctx.policy
        self._clock = ctx.clock
        self._snapshot = ctx.snapshot
        self._progress = ctx.progress
        self.stats = ctx.stats
        self.version: str | None = ctx.version
        self.fenced = False
        # The version is uncertain when the load failed or a put failed ambiguously:
        # a lost condition may then be our own doing, to be checked by a re-read.
        self._uncertain = not ctx.version_known
        self._stopped = False
        self._dirty = False
        self._boundary = False
        self._last_put_at = self._clock()
        self._progress_at_last_put = self._progress()
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._rereads = 0
        # Set while an awaited put runs, so no background put starts beside it.
        self._holding = False

    # -- the hot path -------------------------------------------------------

    def offer(self, boundary: bool) -> None:
        if self._stopped:
            return
        self._dirty = True
        if boundary:
            self._boundary = True
        if self._task is None:
            self._maybe_start()

    def _due(self) -> bool:
        return (
            self._boundary
            or self._progress() - self._progress_at_last_put >= self._policy.min_bytes
            or self._clock() - self._last_put_at >= self._min_interval()
        )

    def _min_interval(self) -> float:
        wanted = self._ctx.interval() if self._ctx.interval is not None else None
        return self._policy.min_interval if wanted is None else wanted

    def _maybe_start(self, *, due: bool = False) -> None:
        if self._stopped or self._holding or not self._dirty:
            return
        if due or self._due():
            self._cancel_timer()
            checkpoint = self._take_snapshot()
            self._task = asyncio.get_running_loop().create_task(self._background_put(checkpoint))
        elif self._timer is None:
            wait = self._last_put_at + self._min_interval() - self._clock()
            self._timer = asyncio.get_running_loop().call_later(max(0.0, wait), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._task is None:
            self._maybe_start(due=True)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _take_snapshot(self) -> StreamCheckpoint:
        self._dirty = False
        self._boundary = False
        self._last_put_at = self._clock()
        self._progress_at_last_put = self._progress()
        return self._snapshot()

    async def _background_put(self, checkpoint: StreamCheckpoint) -> None:
        try:
            await self._put(checkpoint)
        finally:
            self._task = None
            if not self._stopped:
                self._maybe_start()

    # -- awaited paths ------------------------------------------------------

    async def write_now(self) -> None:
        await self.flush(force=True)

    async def flush(self, *, force: bool = False) -> None:
        await self._awaited(write=True, force=force)

    async def settle(self) -> None:
        await self._awaited(write=False, force=False)

    async def _awaited(self, *, write: bool, force: bool) -> None:
        self._holding = True
        self._cancel_timer()
        try:
            async with asyncio.timeout(self._policy.final_flush_timeout):
                while self._task is not None:
                    # shield: a timed-out flush must not cancel a put mid-request,
                    # which would leave the stored version unknown.
                    await asyncio.shield(self._task)
                if write and not self._stopped and (self._dirty or force):
                    await self._put(self._take_snapshot())
        except TimeoutError:
            self.stats.failures += 1
            self._uncertain = True
            log.warning(
                "checkpoint flush for run %s did not finish within %.1fs",
                self._ctx.run_id,
                self._policy.final_flush_timeout,
            )
        finally:
            self._holding = False

    # -- one put, with the fencing rules ------------------------------------

    async def _put(self, checkpoint: StreamCheckpoint) -> None:
        while not self._stopped:
            try:
                version = await self._store.put(checkpoint, expected_version=self.version)
            except CheckpointFenced as exc:
                if await self._explain_fence(exc):
                    continue
                return
            except CheckpointTooLarge as exc:
                self.stats.failures += 1
                self._stop()
                log.error("checkpointing stopped for run %s: %s", self._ctx.run_id, exc)
                return
            except StreamCheckpointError as exc:
                self._put_failed(exc)
                return
            except Exception as exc:  # a store bug must not kill the turn either
                self._put_failed(exc)
                return
            self.version = version
            self._uncertain = False
            self._rereads = 0
            self.stats.puts += 1
            self.stats.bytes += _encoded_size(checkpoint)
            return

    def _put_failed(self, exc: BaseException) -> None:
        self.stats.failures += 1
        # The put may have landed before the failure: our version may be stale now.
        self._uncertain = True
        self._dirty = True
        log.warning(
            "checkpoint put for run %s failed (ignored, the turn goes on): %s",
            self._ctx.run_id,
            exc,
            exc_info=not isinstance(exc, StreamCheckpointError),
        )

    async def _explain_fence(self, exc: CheckpointFenced) -> bool:
        """True when the lost condition is explained and the put should be retried (the
        verdict is :func:`~awaken_s3.streaming.fence.explain_fence`'s)."""
        if self._rereads < MAX_FENCE_REREADS:
            self._rereads += 1
            seen = await read_checkpoint(self._store, self._ctx.run_id)
            if isinstance(seen, Corrupt | Unreadable):
                log.warning("re-read after a lost condition found %s", _described(seen))
            explain = functools.partial(
                explain_fence,
                seen,
                epoch=self._ctx.epoch,
                uncertain=self._uncertain,
                can_ask=self._ctx.confirm_owner is not None,
            )
            verdict = explain()
            if isinstance(verdict, AskOwner):
                verdict = explain(owner=await ask_owner(self._ctx.confirm_owner, self._ctx.run_id))
            if self._follow(verdict):
                return True
            if is_cancel_mark(seen):
                # The API's cancel, not another owner: the expected way a cancel stops a turn.
                self._fence()
                log.info(
                    "checkpoint writer for run %s stopped: the run was cancelled", self._ctx.run_id
                )
                return False
        self._fence()
        log.warning("checkpoint writer for run %s is fenced: %s", self._ctx.run_id, exc)
        return False

    def _fence(self) -> None:
        self.stats.fenced += 1
        self.fenced = True
        self._stop()

    def _follow(self, verdict: FenceVerdict) -> bool:
        match verdict:
            case Adopt(version=version):
                self.version = version
            case Create():
                self.version = None
            case Repair(version=version):
                log.warning(
                    "checkpoint of run %s: a lost condition that is not a newer owner (the run "
                    "record still carries epoch %d); replacing what is stored",
                    self._ctx.run_id,
                    self._ctx.epoch,
                )
                self.stats.repaired += 1
                self.version = version
            case _:
                return False
        return True

    def close(self) -> None:
        """No put starts after this; one in flight is left to finish."""
        self._stop()

    @property
    def in_flight(self) -> asyncio.Task[None] | None:
        """The put still running, if any (after :meth:`aclose`: one that outlasted it)."""
        task = self._task
        return task if task is not None and not task.done() else None

    async def aclose(self) -> None:
        self._stop()
        task = self._task
        if task is None or task.done():
            return
        try:
            async with asyncio.timeout(self._policy.final_flush_timeout):
                await asyncio.shield(task)
        except TimeoutError:
            log.warning("run %s: a checkpoint put was still in flight at close", self._ctx.run_id)
        except Exception as exc:  # the put's own failure was logged where it happened
            log.debug("checkpoint put in flight at close failed: %s", exc)

    def _stop(self) -> None:
        self._stopped = True
        self._cancel_timer()


def _described(seen: Corrupt | Unreadable) -> str:
    if isinstance(seen, Corrupt):
        return f"a corrupt body: {seen.detail}"
    return f"nothing readable: {seen.error}"


def _encoded_size(checkpoint: StreamCheckpoint) -> int:
    try:
        return len(encode_checkpoint(checkpoint))
    except CheckpointTooLarge:
        return 0


def monotonic_clock() -> float:
    return time.monotonic()
