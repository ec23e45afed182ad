"""The turn runner: the thin async loop that drives a :class:`TurnMachine` with real I/O.

One :meth:`TurnRunner.run_turn` call drives one model turn of one run to a
:class:`TurnCompleted` (for the caller to commit), a :class:`TurnSuspended` (deadline; a
later call resumes through R1-R4), a :class:`TurnFailed` (a classified error) or a
:class:`TurnFenced` (the checkpoint layer says another writer owns the run; the caller asks
the run record before it believes it).

Every decision lives in :mod:`awaken_s3.streaming.turn_machine` (pure, its transitions in one
table) and, for what is stored when the turn starts, :func:`~awaken_s3.streaming.fate
.checkpoint_fate` (a checkpoint of a committed turn or a corrupt one is deleted at the version
judged, a newer build's is left alone). What stays here is what touches the world: loading the
checkpoint, asking the run record, the coalescing checkpoint writer, the provider stream with
its idle and deadline watchdog, and sleeping. Also:

* On completion the runner waits for a put in flight (so ``checkpoint_version`` is the stored
  version, for the caller's conditional delete after the commit) but does not write again:
  the caller commits next.
* A stream that ends without a stop reason is a dropped connection.
* When ``run_turn`` returns (or is cancelled) no put of its writer is in flight, unless S3
  outlasted the writer's bounded final wait: a completed turn then hands that put over
  (``TurnCompleted.put_in_flight``), and the caller awaits it before deleting the turn's
  checkpoint, so a put that lands late is deleted too, never left behind.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from awaken_s3.models import StoredCheckpoint
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.cleanup import Cleared, perform, read_checkpoint
from awaken_s3.streaming.coalescer import (
    CheckpointPolicy,
    CheckpointWriter,
    CoalescingCheckpointWriter,
    NullCheckpointWriter,
    StatsCounter,
    WriterContext,
    WriterFactory,
)
from awaken_s3.streaming.coalescer import log as checkpoint_log
from awaken_s3.streaming.errors import ConnectionDropped, ProviderError, StreamStalled
from awaken_s3.streaming.events import StreamEvent
from awaken_s3.streaming.fate import (
    Corrupt,
    Delete,
    Found,
    Keep,
    LeaveNewer,
    Nothing,
    Replace,
    Resume,
    TurnStart,
    checkpoint_fate,
)
from awaken_s3.streaming.outcome import (
    CheckpointStats,
    TurnCompleted,
    TurnFailed,
    TurnFenced,
    TurnOutcome,
    TurnSuspended,
)
from awaken_s3.streaming.provider import ModelRequest, Provider
from awaken_s3.streaming.retry import RandomSource, RetryPolicy
from awaken_s3.streaming.turn_events import Observer, TurnEventView
from awaken_s3.streaming.turn_machine import (
    ATTEMPT_LOST,
    COMPLETED,
    DEADLINE,
    FENCED,
    Action,
    AttemptEnded,
    AttemptResult,
    CallModel,
    Complete,
    ConfirmOwner,
    Fail,
    Fence,
    Flush,
    Flushed,
    Load,
    Loaded,
    Opened,
    OpenWriter,
    OwnerAnswered,
    Sleep,
    Slept,
    Suspend,
    TurnMachine,
)
from awaken_s3.streaming.turn_request import NOT_LOADED, TurnRequest, ask_owner

log = logging.getLogger("awaken_s3.streaming")

__all__ = ["ATTEMPT_LOST", "NOT_LOADED", "TurnRequest", "TurnRunner"]

Clock = Callable[[], float]
Sleeper = Callable[[float], Awaitable[None]]


class TurnRunner:
    def __init__(
        self,
        provider: Provider,
        store: StreamCheckpointStore,
        *,
        writer_id: str,
        retry_policy: RetryPolicy | None = None,
        checkpoint_policy: CheckpointPolicy | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleeper = asyncio.sleep,
        rng: RandomSource | None = None,
        writer_factory: WriterFactory | None = None,
    ) -> None:
        if not writer_id or len(writer_id) > 256:
            raise ValueError("writer_id must be 1..256 characters")
        self.provider = provider
        self.store = store
        self.writer_id = writer_id
        self.retry_policy = retry_policy or RetryPolicy()
        self.checkpoint_policy = checkpoint_policy or CheckpointPolicy()
        self.clock = clock
        self.sleep = sleep
        self.rng: RandomSource = rng or random.Random()
        self.writer_factory: WriterFactory = writer_factory or (
            CoalescingCheckpointWriter if self.checkpoint_policy.enabled else NullCheckpointWriter
        )
        #: checkpoint I/O of the most recent turn (also on each outcome)
        self.last_stats = CheckpointStats()

    async def run_turn(self, turn: TurnRequest, *, observer: Observer | None = None) -> TurnOutcome:
        """Drive ``turn`` to its outcome; ``observer`` (called synchronously, it must not
        block) receives the turn's :data:`~awaken_s3.streaming.turn_events.TurnEvent` s as
        they are decided."""
        driver = _Driver(self, turn, observer)
        try:
            outcome = await driver.run()
        finally:
            await driver.close()
            self.last_stats = driver.stats.frozen()
        lingering = getattr(driver.writer, "in_flight", None)
        if isinstance(outcome, TurnCompleted) and lingering is not None:
            # S3 outlasted the writer's final wait: the caller's delete awaits this put.
            return dataclasses.replace(outcome, put_in_flight=lingering)
        return outcome


class _Driver:
    """Performs one turn's actions and feeds their results back to its machine."""

    def __init__(self, runner: TurnRunner, job: TurnRequest, observer: Observer | None) -> None:
        self.r = runner
        self.job = job
        self.provider = job.provider or runner.provider
        self.view = TurnEventView(observer) if observer is not None else None
        self.resumes_seen = 0
        self.stats = StatsCounter()
        self.machine = TurnMachine(
            run_id=job.run_id,
            thread_id=job.thread_id,
            turn=job.turn,
            epoch=job.epoch,
            writer_id=runner.writer_id,
            request=job.request,
            prefill=self.provider.capabilities(job.request.model).assistant_prefill,
            policy=runner.retry_policy,
            rng=runner.rng,
            deadline=job.deadline,
            provider_name=self.provider.name,
            leased=job.leased,
        )
        self.writer: CheckpointWriter | None = None
        self.chars_at_start = 0

    async def run(self) -> TurnOutcome:
        machine = self.machine
        existing = self.job.existing
        if not self.r.checkpoint_policy.enabled or existing is None:
            action = machine.start(Loaded(None))
        elif existing is NOT_LOADED:
            action = machine.start()
        else:
            action = machine.start(await self.load(existing))
        while True:
            self.report_resumes()
            match action:
                case Load():
                    action = machine.send(await self.load())
                case ConfirmOwner():
                    action = machine.send(OwnerAnswered(await self.still_owner()))
                case OpenWriter():
                    action = machine.send(await self.open_writer(action))
                case CallModel(request=request):
                    result = await self.attempt(request)
                    action = machine.send(AttemptEnded(result, self.r.clock()))
                case Flush(write=write, force=force):
                    writer = self.require_writer()
                    if write:
                        await writer.flush(force=force)
                    else:
                        await writer.settle()
                    action = machine.send(Flushed(writer.fenced, self.r.clock()))
                case Sleep(seconds=seconds):
                    await self.r.sleep(seconds)
                    action = machine.send(Slept(self.r.clock()))
                case _:
                    return self.outcome(action)

    def outcome(self, action: Action) -> TurnOutcome:
        machine = self.machine
        version = self.writer.version if self.writer is not None else machine.loaded_version
        stats = self.stats.frozen()
        match action:
            case Complete():
                if self.view is not None:
                    self.view.completed(action.message)
                return TurnCompleted(
                    message=action.message,
                    stop_reason=action.stop_reason,
                    usage=action.usage,
                    plan_kind=machine.plan_kind,
                    dropped_tool_calls=action.dropped,
                    checkpoint_version=version,
                    retry_count=machine.retry_count,
                    checkpoint_stats=stats,
                )
            case Suspend():
                return TurnSuspended(
                    checkpoint_version=version,
                    retry_count=machine.retry_count,
                    checkpoint_stats=stats,
                    new_chars=machine.acc.content_chars - self.chars_at_start,
                )
            case Fail(error=error):
                return TurnFailed(
                    error=error,
                    checkpoint_version=version,
                    retry_count=machine.retry_count,
                    checkpoint_stats=stats,
                    dropped_tool_calls=tuple(machine.dropped),
                )
            case Fence(detail=detail):
                return TurnFenced(
                    detail=detail, retry_count=machine.retry_count, checkpoint_stats=stats
                )
        raise AssertionError(f"not a terminal action: {action!r}")

    def report_resumes(self) -> None:
        view, resumes = self.view, self.machine.resumes
        if view is None:
            return
        while self.resumes_seen < len(resumes):
            view.resumed(resumes[self.resumes_seen], retry_count=self.machine.retry_count)
            self.resumes_seen += 1

    def require_writer(self) -> CheckpointWriter:
        assert self.writer is not None, "the machine flushes only after opening the writer"
        return self.writer

    async def close(self) -> None:
        if self.writer is not None:
            await self.writer.aclose()

    # -- the I/O behind each action -------------------------------------------------------

    async def still_owner(self) -> bool:
        return await ask_owner(self.job.confirm_owner, self.job.run_id)

    async def load(self, found: Found | None = None) -> Loaded:
        """Judge what is stored (read now, or ``found`` by the caller) as the start of this
        turn (:func:`~awaken_s3.streaming.fate.checkpoint_fate`) and perform the verdict."""
        run_id = self.job.run_id
        if found is None:
            found = await read_checkpoint(self.r.store, run_id)
        fate = checkpoint_fate(found, TurnStart(self.job.turn, self.job.thread_id))
        match fate:
            case Nothing():
                return Loaded(None)
            case Resume(stored=stored) | Replace(stored=stored):
                return Loaded(stored)  # the machine plans it, or replaces it unplayed
            case LeaveNewer(schema_version=schema):
                # A newer build wrote it (a rollback, a rolling deploy): not ours to read,
                # replace or delete while the run goes on. This turn runs without checkpoints.
                self.stats.newer_schema += 1
                checkpoint_log.warning(
                    "run %s: the checkpoint has schema version %d, newer than this build reads; "
                    "it is left alone and this turn runs without checkpoints",
                    run_id,
                    schema,
                )
                return Loaded(None, checkpointing=False)
            case Keep(reason=reason):
                self.stats.load_failures += 1
                checkpoint_log.warning(
                    "run %s: the checkpoint %s; starting the turn fresh", run_id, reason
                )
                return Loaded(None, version_known=False)
        assert isinstance(fate, Delete)
        if isinstance(found, Corrupt):
            self.stats.load_failures += 1
            checkpoint_log.warning("run %s: discarding a corrupt checkpoint: %s", run_id, found)
        cleared = await perform(self.r.store, run_id, fate)
        if cleared is Cleared.GONE:
            return Loaded(None)
        if cleared is Cleared.LEFT and isinstance(found, StoredCheckpoint):
            return Loaded(found)  # stale, still there: never replayed, replaced by our first put
        # Left where no version was known, or rewritten meanwhile: our first put may meet an
        # object it did not expect, whose lost condition the writer then resolves.
        return Loaded(None, version_known=False)

    async def open_writer(self, action: OpenWriter) -> Opened:
        machine = self.machine
        factory = self.r.writer_factory if action.checkpointing else NullCheckpointWriter
        self.writer = factory(
            WriterContext(
                store=self.r.store,
                run_id=self.job.run_id,
                epoch=machine.epoch,
                writer_id=self.r.writer_id,
                snapshot=machine.snapshot,
                progress=lambda: machine.acc.content_chars,
                version=action.version,
                version_known=action.version_known,
                policy=self.r.checkpoint_policy,
                clock=self.r.clock,
                stats=self.stats,
                confirm_owner=self.job.confirm_owner,
            )
        )
        self.chars_at_start = machine.acc.content_chars
        if action.write_first:
            await self.writer.write_now()
        return Opened(self.writer.fenced, self.r.clock())

    async def attempt(self, request: ModelRequest) -> AttemptResult:
        """One model call, until the stream ends, fails, stalls or the deadline comes."""
        writer = self.require_writer()
        acc = self.machine.acc
        clock = self.r.clock
        deadline = self.job.deadline
        idle = self.r.retry_policy.idle_timeout
        loop = asyncio.get_running_loop()
        try:
            stream = self.provider.stream(request)
        except ProviderError as exc:
            return exc
        iterator: AsyncIterator[StreamEvent] = aiter(stream)
        view = self.view
        by_deadline = False
        try:
            async with asyncio.timeout(None) as watchdog:
                while True:
                    wait = idle
                    by_deadline = False
                    if deadline is not None:
                        remaining = deadline - clock()
                        if remaining <= 0:
                            return COMPLETED if acc.stop_reason is not None else DEADLINE
                        if remaining < wait:
                            wait, by_deadline = remaining, True
                    watchdog.reschedule(loop.time() + wait)
                    try:
                        event = await anext(iterator)
                    except StopAsyncIteration:
                        break
                    pending = writer.offer(acc.apply(event))
                    if view is not None:
                        view.applied(event, acc)
                    if pending is not None:
                        await pending
                    if writer.fenced:
                        return FENCED
        except TimeoutError:
            if not watchdog.expired():
                return ConnectionDropped("the provider stream raised TimeoutError")
            if acc.stop_reason is not None:
                return COMPLETED
            if by_deadline:
                return DEADLINE
            return StreamStalled(
                f"no stream event for {idle:g}s; the stream was abandoned",
                provider=self.provider.name,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return exc
        finally:
            await _close(iterator)
        if acc.stop_reason is None:
            return ConnectionDropped(
                "the stream ended without a stop reason", provider=self.provider.name
            )
        return COMPLETED


async def _close(iterator: AsyncIterator[StreamEvent]) -> None:
    closer = getattr(iterator, "aclose", None)
    if closer is None:
        return
    try:
        await closer()
    except Exception as exc:  # closing an abandoned stream must not mask the outcome
        log.debug("closing the provider stream failed: %s", exc)
