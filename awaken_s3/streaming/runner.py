"""The turn runner: load, plan, stream, checkpoint, recover, return the whole turn.

One :meth:`TurnRunner.run_turn` call drives one model turn of one run to a
:class:`TurnCompleted` (for the caller to commit), a :class:`TurnSuspended`
(deadline; a later call resumes through R1-R4) or a :class:`TurnFailed`.

Decisions (see docs in each module for the pure parts):

* A resumed attempt (a checkpoint of this turn, not written by a clean
  suspension) counts as one interruption. Before calling the model, the runner
  writes the checkpoint back with the new retry count, its epoch and writer id:
  a process that keeps dying still exhausts the budget, and a zombie learns it is
  fenced before paying for a model call. For R3 that write already drops the
  broken calls (they are reported in this attempt's outcome; a second crash
  plans the remaining text as R1, which continues identically).
* In-process interruptions are planned exactly like a crash: the accumulated
  partial goes through :func:`plan_recovery`; an R2 completes the tool-use turn
  without another model call. ``plan_kind`` reports the plan of the loaded
  checkpoint only (None for a fresh turn), as the caller's "how was this resumed".
* Checkpoints are cumulative: the accumulator of a resumed turn starts from the
  prefix, so every later checkpoint holds prefix + new text.
* A provider that rejects a prefill it claimed to support (:class:`PrefillRejected`)
  gets one immediate retry in the no-prefill form; it is a different request,
  not a retry of the rejected one, and costs no budget.
* On completion the runner waits for a put in flight (so ``checkpoint_version``
  is the stored version, for the caller's conditional delete after the commit)
  but does not write again: the caller commits next.
* A stream that ends without a stop reason is a dropped connection.
* A fence seen in the checkpoint layer (a lost condition the stored object does
  not explain, a saved checkpoint from an epoch above ours) is a hint: with the
  request's ``confirm_owner`` the runner asks the run record, and when it still
  carries our epoch the checkpoint is what is wrong and is replaced. Otherwise
  the turn ends :class:`TurnFenced` and the caller decides from the run record.
* When ``run_turn`` returns (or is cancelled) no put of its writer is in flight:
  a writer that has stopped never lands a put later, so the caller's clean-up
  of a fenced writer's object cannot be undone behind its back.
* A stream that stops for tool use without one complete call is an interruption
  (:class:`ToolCallsLost`), planned like any other: never a final answer.
* Reusable reasoning and server blocks (:mod:`awaken_s3.streaming.reasoning`) are
  carried with the prefix; a prefix carrying reasoning never goes out as a prefill.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final, Literal

from awaken_s3.errors import CheckpointCorrupt, CheckpointSchemaUnsupported, StreamCheckpointError
from awaken_s3.messages import KeptBlock
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.accumulator import StreamAccumulator
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
from awaken_s3.streaming.continuation import build_continuation_request
from awaken_s3.streaming.errors import (
    ConnectionDropped,
    PrefillRejected,
    ProviderError,
    StreamStalled,
    ToolCallsLost,
)
from awaken_s3.streaming.events import StreamEvent
from awaken_s3.streaming.outcome import (
    CheckpointStats,
    ClassifiedError,
    DroppedToolCall,
    TurnCompleted,
    TurnFailed,
    TurnFenced,
    TurnOutcome,
    TurnSuspended,
    Usage,
)
from awaken_s3.streaming.provider import ModelRequest, Provider
from awaken_s3.streaming.reasoning import carries_reasoning
from awaken_s3.streaming.recovery import (
    PlanKind,
    has_reusable_text,
    plan_recovery,
    synthesized_turn,
)
from awaken_s3.streaming.retry import RandomSource, RetryPolicy, budget_exhausted, classify, decide
from awaken_s3.streaming.turn_request import NOT_LOADED, TurnRequest, _NotLoaded

log = logging.getLogger("awaken_s3.streaming")

__all__ = ["ATTEMPT_LOST", "NOT_LOADED", "TurnRequest", "TurnRunner"]

#: retry code recorded for an attempt whose process was lost (crash, kill, timeout)
ATTEMPT_LOST: Final = "attempt_lost"

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
_Ended = Literal["completed", "deadline", "fenced"]


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
        sleep: Sleep = asyncio.sleep,
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

    async def run_turn(self, turn: TurnRequest) -> TurnOutcome:
        job = _Turn(self, turn)
        try:
            return await job.run(turn.existing)
        finally:
            await job.close()
            self.last_stats = job.stats.frozen()


class _Turn:
    """The state of one run_turn call."""

    def __init__(self, runner: TurnRunner, job: TurnRequest) -> None:
        self.r = runner
        self.job = job
        self.run_id = job.run_id
        self.thread_id = job.thread_id
        self.turn = job.turn
        self.epoch = job.epoch
        self.request = job.request
        self.deadline = job.deadline
        self.stats = StatsCounter()
        self.retry_count = 0
        self.last_error: str | None = None
        self.suspended = False
        self.plan_kind: PlanKind | None = None
        #: the plan of the latest resume, from a checkpoint or in process (for live views)
        self.last_plan: PlanKind | None = None
        self.dropped: list[DroppedToolCall] = []
        self.prefill = runner.provider.capabilities(self.request.model).assistant_prefill
        self.acc = StreamAccumulator(trim_echo=not self.prefill)
        self.writer: CheckpointWriter | None = None
        self.chars_at_start = 0
        #: False when the stored object must be left alone (a newer build's checkpoint)
        self.checkpointing = runner.checkpoint_policy.enabled

    # -- outcomes -----------------------------------------------------------

    @property
    def version(self) -> str | None:
        return self.writer.version if self.writer is not None else None

    def failed(self, error: ClassifiedError, version: str | None = None) -> TurnFailed:
        return TurnFailed(
            error=error,
            checkpoint_version=version if self.writer is None else self.writer.version,
            retry_count=self.retry_count,
            checkpoint_stats=self.stats.frozen(),
            dropped_tool_calls=tuple(self.dropped),
        )

    def fenced(self, detail: str) -> TurnFenced:
        log.warning("run %s turn %d: fenced: %s", self.run_id, self.turn, detail)
        return TurnFenced(
            detail=detail, retry_count=self.retry_count, checkpoint_stats=self.stats.frozen()
        )

    def completed(
        self, stop_reason: str, usage: Usage, *, synthesized: bool = False
    ) -> TurnCompleted:
        if synthesized:
            message = synthesized_turn(plan_recovery(self.snapshot()))
            _, now_dropped = self.acc.split_tool_calls()
        else:
            message, now_dropped = self.acc.message()
        return TurnCompleted(
            message=message,
            stop_reason=stop_reason,
            usage=usage,
            plan_kind=self.plan_kind,
            dropped_tool_calls=(*self.dropped, *now_dropped),
            checkpoint_version=self.version,
            retry_count=self.retry_count,
            checkpoint_stats=self.stats.frozen(),
        )

    async def suspend(self) -> TurnOutcome:
        assert self.writer is not None
        self.suspended = True
        await self.writer.flush(force=True)
        if self.writer.fenced:
            return self.fenced("a newer writer replaced the checkpoint during suspension")
        log.info("run %s turn %d suspended at the deadline", self.run_id, self.turn)
        return TurnSuspended(
            checkpoint_version=self.writer.version,
            retry_count=self.retry_count,
            checkpoint_stats=self.stats.frozen(),
            new_chars=self.acc.content_chars - self.chars_at_start,
        )

    def snapshot(self) -> StreamCheckpoint:
        return self.acc.snapshot(
            run_id=self.run_id,
            thread_id=self.thread_id,
            model=self.request.model,
            turn=self.turn,
            retry_count=self.retry_count,
            epoch=self.epoch,
            writer=self.r.writer_id,
            suspended=self.suspended,
            last_error=self.last_error,
            resumed_with=self.last_plan,
        )

    def restart(self, prefix_text: str, blocks: tuple[KeptBlock, ...]) -> None:
        """Continue from a plan's prefix; carried reasoning means thinking is on, and the
        APIs refuse a prefill then, so the prefix goes out with a continue message."""
        if carries_reasoning(blocks):
            self.prefill = False
        self.acc.restart(prefix_text, trim_echo=not self.prefill, blocks=blocks)

    def tool_calls_lost(self) -> ToolCallsLost | None:
        """A tool-use stop without one complete call: an interruption, never an answer."""
        if self.acc.stop_reason != "tool_use":
            return None
        complete, dropped = self.acc.split_tool_calls()
        if complete:
            return None
        return ToolCallsLost(
            f"the model stopped for tool use but none of its {len(dropped)} tool calls "
            "was complete",
            provider=self.r.provider.name,
        )

    async def close(self) -> None:
        if self.writer is not None:
            await self.writer.aclose()

    # -- the turn -----------------------------------------------------------

    async def run(self, existing: StoredCheckpoint | _NotLoaded | None) -> TurnOutcome:
        version_known = True
        stored: StoredCheckpoint | None = None
        if not self.r.checkpoint_policy.enabled:
            stored = None
        elif existing is NOT_LOADED:
            stored, version_known = await self.load()
        else:
            stored = existing

        version: str | None = None
        resumed = False
        if stored is not None:
            saved = stored.checkpoint
            if saved.epoch > self.epoch:
                if not await self.still_owner():
                    return self.fenced(
                        f"the checkpoint was written under lease epoch {saved.epoch}, "
                        f"newer than ours ({self.epoch})"
                    )
                # The run record says no newer epoch exists (a restored table, a planted
                # object): the checkpoint is a hint like any other, replaced by our writes.
                log.warning(
                    "run %s: the checkpoint carries epoch %d, above the run's %d; the run "
                    "record says we hold it, so the checkpoint is replaced",
                    self.run_id,
                    saved.epoch,
                    self.epoch,
                )
            version = stored.version
            if saved.turn != self.turn or saved.thread_id != self.thread_id:
                # Stale: its turn is not the one we run. Never replay it; our first
                # put replaces it conditionally (or creates it, if the caller
                # deleted it meanwhile: hence "uncertain").
                version_known = False
                log.info(
                    "run %s: ignoring a checkpoint of turn %d while running turn %d",
                    self.run_id,
                    saved.turn,
                    self.turn,
                )
            else:
                plan = plan_recovery(saved)
                self.plan_kind = self.last_plan = plan.kind
                self.dropped.extend(plan.dropped)
                self.retry_count = saved.retry_count
                self.last_error = saved.last_error
                log.info(
                    "run %s turn %d: resuming with plan %s (%d dropped tool calls)",
                    self.run_id,
                    self.turn,
                    plan.kind,
                    len(plan.dropped),
                )
                if plan.kind == "R2":
                    return TurnCompleted(
                        message=synthesized_turn(plan),
                        stop_reason="tool_use",
                        usage=Usage(),
                        plan_kind="R2",
                        dropped_tool_calls=plan.dropped,
                        checkpoint_version=version,
                        retry_count=self.retry_count,
                        checkpoint_stats=self.stats.frozen(),
                    )
                if not saved.suspended:
                    self.retry_count += 1
                    self.last_error = ATTEMPT_LOST
                if self.retry_count > self.r.retry_policy.max_interruptions:
                    return self.failed(budget_exhausted(self.retry_count, self.last_error), version)
                self.restart(plan.prefix_text, plan.blocks)
                resumed = True

        factory = self.r.writer_factory if self.checkpointing else NullCheckpointWriter
        self.writer = factory(
            WriterContext(
                store=self.r.store,
                run_id=self.run_id,
                epoch=self.epoch,
                writer_id=self.r.writer_id,
                snapshot=self.snapshot,
                progress=lambda: self.acc.content_chars,
                version=version,
                version_known=version_known,
                policy=self.r.checkpoint_policy,
                clock=self.r.clock,
                stats=self.stats,
                confirm_owner=self.job.confirm_owner,
            )
        )
        self.chars_at_start = self.acc.content_chars
        if resumed:
            await self.writer.write_now()
            if self.writer.fenced:
                return self.fenced("another writer replaced the checkpoint we resumed from")
        return await self.stream_until_done()

    async def still_owner(self) -> bool:
        confirm = self.job.confirm_owner
        if confirm is None:
            return False
        try:
            return await confirm()
        except Exception as exc:  # an unreadable run record proves nothing either way
            log.warning("run %s: could not confirm the lease: %s", self.run_id, exc)
            return False

    async def load(self) -> tuple[StoredCheckpoint | None, bool]:
        try:
            return await self.r.store.get(self.run_id), True
        except CheckpointCorrupt as exc:
            self.stats.load_failures += 1
            checkpoint_log.warning("run %s: discarding a corrupt checkpoint: %s", self.run_id, exc)
            if exc.version is None:
                # No version to make the delete conditional on: leave the object to our first
                # put, whose lost condition the run record then resolves (replace).
                return None, False
            try:
                # Conditional on the version judged corrupt: a body rewritten meanwhile is kept.
                await self.r.store.delete(self.run_id, expected_version=exc.version)
            except StreamCheckpointError as delete_exc:
                checkpoint_log.warning("run %s: could not delete it: %s", self.run_id, delete_exc)
                return None, False
            return None, True
        except CheckpointSchemaUnsupported as exc:
            # A newer build wrote it (a rollback, a rolling deploy): not ours to read, replace
            # or delete while the run goes on. This turn runs without checkpoints.
            self.stats.newer_schema += 1
            self.checkpointing = False
            checkpoint_log.warning(
                "run %s: the checkpoint has schema version %d, newer than this build reads; "
                "it is left alone and this turn runs without checkpoints",
                self.run_id,
                exc.schema_version,
            )
            return None, True
        except StreamCheckpointError as exc:
            self.stats.load_failures += 1
            checkpoint_log.warning(
                "run %s: could not load the checkpoint, starting the turn fresh: %s",
                self.run_id,
                exc,
            )
            return None, False

    async def stream_until_done(self) -> TurnOutcome:
        writer = self.writer
        assert writer is not None
        policy = self.r.retry_policy
        prefill_fallback_used = False
        while True:
            if self.deadline is not None and self.r.clock() >= self.deadline:
                return await self.suspend()
            prefix = self.acc.text
            sent_prefix = has_reusable_text(prefix)
            request = (
                build_continuation_request(
                    self.request, prefix, prefill=self.prefill, blocks=self.acc.reusable_blocks
                )
                if sent_prefix
                else self.request
            )
            ended = await self.attempt(request)
            if ended == "completed":
                ended = self.tool_calls_lost() or ended
            if ended == "completed":
                await writer.settle()
                if writer.fenced:
                    return self.fenced("the checkpoint was taken over while the turn finished")
                assert self.acc.stop_reason is not None
                return self.completed(self.acc.stop_reason, self.acc.usage)
            if ended == "fenced":
                return self.fenced("a conditional checkpoint write lost: another writer owns it")
            if ended == "deadline":
                return await self.suspend()

            error = ended
            classified = classify(error)
            if (
                isinstance(error, PrefillRejected)
                and self.prefill
                and sent_prefix
                and not prefill_fallback_used
            ):
                log.warning(
                    "run %s: %s rejected the assistant prefix; continuing without prefill",
                    self.run_id,
                    self.r.provider.name,
                )
                prefill_fallback_used = True
                self.prefill = False
                self.acc.restart(self.acc.text, trim_echo=True, blocks=self.acc.reusable_blocks)
                continue
            if not classified.retryable:
                if not isinstance(error, ProviderError):
                    log.error(
                        "run %s: unexpected error from provider %s",
                        self.run_id,
                        self.r.provider.name,
                        exc_info=error,
                    )
                await writer.flush()
                return self.failed(classified)

            self.retry_count += 1
            self.last_error = classified.code
            decision = decide(policy, error, interruptions=self.retry_count, rng=self.r.rng)
            # Plan the partial exactly as a later process would plan its checkpoint.
            plan = plan_recovery(self.snapshot())
            self.last_plan = plan.kind
            if plan.kind == "R2":
                await writer.flush(force=True)
                if writer.fenced:
                    return self.fenced("the checkpoint was taken over during recovery")
                return self.completed("tool_use", self.acc.usage, synthesized=True)
            self.dropped.extend(plan.dropped)
            self.restart(plan.prefix_text, plan.blocks)
            await writer.flush(force=True)
            if writer.fenced:
                return self.fenced("the checkpoint was taken over during recovery")
            if not decision.retry:
                return self.failed(decision.error)
            log.warning(
                "run %s turn %d: %s (interruption %d of %d), plan %s, retrying in %.2fs",
                self.run_id,
                self.turn,
                classified.code,
                self.retry_count,
                policy.max_interruptions,
                plan.kind,
                decision.delay,
            )
            if self.deadline is not None and self.r.clock() + decision.delay >= self.deadline:
                return await self.suspend()
            await self.r.sleep(decision.delay)

    async def attempt(self, request: ModelRequest) -> _Ended | BaseException:
        """One model call, until the stream ends, fails, stalls or the deadline comes."""
        writer = self.writer
        assert writer is not None
        acc = self.acc
        clock = self.r.clock
        deadline = self.deadline
        idle = self.r.retry_policy.idle_timeout
        loop = asyncio.get_running_loop()
        try:
            stream = self.r.provider.stream(request)
        except ProviderError as exc:
            return exc
        iterator: AsyncIterator[StreamEvent] = aiter(stream)
        by_deadline = False
        try:
            async with asyncio.timeout(None) as watchdog:
                while True:
                    wait = idle
                    by_deadline = False
                    if deadline is not None:
                        remaining = deadline - clock()
                        if remaining <= 0:
                            return "completed" if acc.stop_reason is not None else "deadline"
                        if remaining < wait:
                            wait, by_deadline = remaining, True
                    watchdog.reschedule(loop.time() + wait)
                    try:
                        event = await anext(iterator)
                    except StopAsyncIteration:
                        break
                    pending = writer.offer(acc.apply(event))
                    if pending is not None:
                        await pending
                    if writer.fenced:
                        return "fenced"
        except TimeoutError:
            if not watchdog.expired():
                return ConnectionDropped("the provider stream raised TimeoutError")
            if acc.stop_reason is not None:
                return "completed"
            if by_deadline:
                return "deadline"
            return StreamStalled(
                f"no stream event for {idle:g}s; the stream was abandoned",
                provider=self.r.provider.name,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return exc
        finally:
            await _close(iterator)
        if acc.stop_reason is None:
            return ConnectionDropped(
                "the stream ended without a stop reason", provider=self.r.provider.name
            )
        return "completed"


async def _close(iterator: AsyncIterator[StreamEvent]) -> None:
    closer = getattr(iterator, "aclose", None)
    if closer is None:
        return
    try:
        await closer()
    except Exception as exc:  # closing an abandoned stream must not mask the outcome
        log.debug("closing the provider stream failed: %s", exc)
