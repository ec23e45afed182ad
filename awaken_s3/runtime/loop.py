"""The run loop: drive one run from its committed state until it ends or must pause.

One :meth:`RunLoop.run` call is one worker invocation. It claims the run's lease, then
repeats: run pending tool calls and commit their results, or run the next model turn and
commit it, deleting the turn's checkpoint after the commit. It stops when the model ends the
run (completed), at the step limit or on a permanent error (failed, with the classified
error), when the API cancelled the run, or at the deadline (suspended, lease released:
the caller enqueues a continuation).

Liveness: the run record is the only authority on who drives a run. Every way out of
:meth:`RunLoop.run` leaves the run ended, or with its lease released (the caller sends the
message that drives it next), or owned by another epoch that the returned run state shows.
A fence seen in the checkpoint layer is only a hint: the loop re-reads the run, and when the
run still carries its epoch, the checkpoint was wrong and the loop carries on (or, if it
cannot, releases the lease like a suspension). A worker that another epoch really fenced
deletes, conditionally on its version, any checkpoint object it wrote itself, and touches
nothing else.

Everything the loop decides from is committed state (DynamoDB); the checkpoint is only a
hint for the unfinished turn and is never replayed once its turn is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from awaken_s3.errors import (
    CheckpointCorrupt,
    CheckpointFenced,
    CheckpointSchemaUnsupported,
    StreamCheckpointError,
)
from awaken_s3.messages import Message, ToolResultBlock, ToolUseBlock
from awaken_s3.models import StoredCheckpoint
from awaken_s3.runtime.endings import budget_error, turn_ending
from awaken_s3.runtime.history import request_messages
from awaken_s3.runtime.lease import LeaseKeeper
from awaken_s3.runtime.tool_batch import run_batch
from awaken_s3.runtime.tools import CallSite, ToolRegistry, execute_tool_call
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.cleanup import LATE_PUT_WAIT, delete_checkpoint, delete_turn_checkpoint
from awaken_s3.streaming.outcome import (
    ClassifiedError,
    DroppedToolCall,
    TurnCompleted,
    TurnFailed,
    TurnFenced,
    TurnOutcome,
    TurnSuspended,
)
from awaken_s3.streaming.provider import ModelRequest, Provider
from awaken_s3.streaming.turn_request import NOT_LOADED, TurnRequest
from awaken_s3.threads.base import ThreadStore
from awaken_s3.threads.errors import (
    CommitFenced,
    LeaseLost,
    LeaseUnavailable,
    ThreadMovedOn,
    ThreadNotFound,
    ThreadStoreError,
    ToolCallConflict,
)
from awaken_s3.threads.models import RunState, RunStatus, TurnCommit

if TYPE_CHECKING:
    from awaken_s3.agents import Agent, App

log = logging.getLogger("awaken_s3.runtime")
T = TypeVar("T")


class TurnRunnerLike(Protocol):
    """What the loop needs from :class:`awaken_s3.streaming.runner.TurnRunner`."""

    async def run_turn(self, turn: TurnRequest) -> TurnOutcome: ...


#: called after the claim and after every lease renewal (the worker keeps its queue record's
#: visibility in step with the lease); failures are logged and never end the run
Heartbeat = Callable[[], Awaitable[None]]
#: the provider an agent's turns stream from; None: the runner's own
ProviderLookup = Callable[["Agent"], Awaitable[Provider | None]]


class RunListener(Protocol):
    """Told what the loop committed (the worker's live pushes, ``awaken_s3.service.push``)."""

    def turn_committed(self, run: RunState, message: Message) -> None:
        """``message`` is committed as the run's turn ``run.turn - 1``; must not block."""


class RunEnd(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: the deadline came first (or a checkpoint fault the loop could not repair): the lease is
    #: released; enqueue a continuation
    SUSPENDED = "suspended"
    #: another epoch drives the run (``run`` shows it, or is None when it could not be read);
    #: this worker stopped without touching the run
    FENCED = "fenced"
    #: another worker holds a lease; it runs out after ``retry_after``
    BUSY = "busy"
    #: the run had already ended before this invocation
    NOT_RUNNABLE = "not_runnable"


@dataclass(frozen=True, slots=True)
class RunResult:
    run_id: str
    end: RunEnd
    run: RunState | None = None
    #: model turns this invocation committed
    turns_committed: int = 0
    #: tool calls this invocation resolved (run, answered from a record, or unknown outcome)
    tool_calls: int = 0
    error: ClassifiedError | None = None
    detail: str = ""
    #: for BUSY: seconds until the holder's lease expires (a dead holder's run is free then)
    retry_after: float | None = None
    #: a checkpoint of an ended run could not be deleted: stale, never replayed, and left to
    #: the sweeper (which deletes checkpoints that outlived their runs)
    checkpoint_left: bool = False
    #: seconds from the last renewal of a holder that died without releasing the run to this
    #: invocation's claim (None when the previous holder released it)
    resume_delay: float | None = None

    @property
    def should_continue(self) -> bool:
        """The caller must enqueue a continuation (the run paused at the deadline)."""
        return self.end == RunEnd.SUSPENDED


STEP_LIMIT = "step_limit"
THREAD_MOVED_ON = "thread_moved_on"
UNKNOWN_TOOL = "unknown_tool"
UNKNOWN_AGENT = "unknown_agent"
NO_PROGRESS = "no_progress"
#: suspensions in a row without progress after which a run fails (see RunLoop)
DEFAULT_MAX_IDLE_SUSPENSIONS = 5
#: checkpoint faults an invocation repairs in place before it hands the run over
_MAX_REPAIRS = 2


def pending_tool_calls(history: Sequence[Message]) -> tuple[ToolUseBlock, ...]:
    """Tool calls of a committed assistant turn whose results are not committed yet."""
    if not history or history[-1].role != "assistant":
        return ()
    return history[-1].tool_uses


class RunLoop:
    def __init__(
        self,
        store: ThreadStore,
        runner: TurnRunnerLike,
        checkpoints: StreamCheckpointStore,
        tools: ToolRegistry | None = None,
        *,
        worker_id: str,
        lease_seconds: float = 60.0,
        renew_every: float | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        max_idle_suspensions: int = DEFAULT_MAX_IDLE_SUSPENSIONS,
        app: App | None = None,
        provider_for: ProviderLookup | None = None,
        turn_headroom: float = 0.0,
        listener: RunListener | None = None,
    ) -> None:
        """``app``: the agents whose runs this loop drives (a run names its agent); without
        one, every run is the default agent's, with ``tools``. ``provider_for``: the provider
        of an agent's turns (None for the runner's own). ``listener``: told of each commit."""
        if max_idle_suspensions < 1:
            raise ValueError("max_idle_suspensions must be >= 1")
        if app is not None and tools is not None:
            raise ValueError("give the tools to the app's agents, not to the loop")
        if app is None:
            from awaken_s3.agents import Agent, App

            registry = tools or ToolRegistry()
            app = App([Agent("default", tools=list(registry))])
        self.app = app
        self.provider_for = provider_for
        self.store = store
        self.runner = runner
        self.checkpoints = checkpoints
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        #: 0 disables renewal (tests that want leases to expire mid-turn)
        self.renew_every = renew_every
        self._clock = clock
        self._monotonic = monotonic
        #: a run that suspends this many times in a row without committing anything or
        #: growing its checkpoint fails with ``no_progress`` instead of looping forever
        self.max_idle_suspensions = max_idle_suspensions
        #: seconds before the deadline after which an invocation that already made progress
        #: hands the run over instead of starting another model turn (0: only at the deadline)
        self.turn_headroom = turn_headroom
        self.listener = listener

    async def run(
        self, run_id: str, *, deadline: float | None = None, heartbeat: Heartbeat | None = None
    ) -> RunResult:
        """Drive ``run_id`` until it ends, pauses at ``deadline`` (a ``time.monotonic()``
        instant) or turns out to be someone else's."""
        try:
            run = await self.store.claim_run(
                run_id, worker=self.worker_id, lease_seconds=self.lease_seconds
            )
        except LeaseUnavailable as exc:
            current = await self.store.get_run(run_id)
            if not current.status.runnable:
                left = await _clean_leftover(self.checkpoints, run_id)
                return RunResult(
                    run_id, RunEnd.NOT_RUNNABLE, current, detail=str(exc), checkpoint_left=left
                )
            wait = max(0.0, current.lease.lease_until - self._clock())
            return RunResult(run_id, RunEnd.BUSY, current, detail=str(exc), retry_after=wait)
        resume_delay = None
        if run.previous_lease_until > 0:
            # The previous holder never released the run: it died (or lost its lease) after
            # its last renewal, which set the lease it left to expire at previous_lease_until.
            last_renewal = run.previous_lease_until - self.lease_seconds
            resume_delay = max(0.0, self._clock() - last_renewal)
        await _beat(heartbeat, run_id)
        keeper = LeaseKeeper(
            self.store,
            run_id=run_id,
            worker=self.worker_id,
            epoch=run.lease.epoch,
            lease_seconds=self.lease_seconds,
            interval=self.renew_every,
            on_renewed=(lambda: _beat(heartbeat, run_id)) if heartbeat is not None else None,
        )
        drive = _Drive(self, run, keeper, deadline, resume_delay)
        keeper.start()
        try:
            return await drive.run()
        except BaseException:
            await keeper.stop()
            await drive.release_after_crash()
            raise
        finally:
            await keeper.stop()


def _callers_id(owner: str, stored: str) -> str:
    """The id as the run's caller named it (the HTTP API keeps ids in a namespace per caller);
    an id stored outside any namespace is the caller's as it is."""
    from awaken_s3.service.scoping import public_id

    try:
        return public_id(owner, stored)
    except ValueError:
        return stored


async def _beat(heartbeat: Heartbeat | None, run_id: str) -> None:
    if heartbeat is None:
        return
    try:
        await heartbeat()
    except Exception as exc:  # the lease, not the queue record, is the authority
        log.warning("run %s: heartbeat failed: %s", run_id, exc)


async def _clean_leftover(checkpoints: StreamCheckpointStore, run_id: str) -> bool:
    """Delete the checkpoint of an ended run (a crash between the final commit and its delete
    leaves one), conditionally on the version read. True when one is left behind."""
    try:
        stored = await checkpoints.get(run_id)
    except (CheckpointCorrupt, CheckpointSchemaUnsupported) as exc:
        # The run ended: whatever is stored is stale, a newer build's checkpoint included.
        if exc.version is None:
            log.warning("run %s: a leftover checkpoint without a version: %s", run_id, exc)
            return True
        version: str | None = exc.version
    except StreamCheckpointError as exc:
        log.warning("run %s: could not read a leftover checkpoint: %s", run_id, exc)
        return True
    else:
        if stored is None:
            return False
        version = stored.version
    log.info("run %s ended: deleting its leftover checkpoint", run_id)
    try:
        await checkpoints.delete(run_id, expected_version=version)
    except CheckpointFenced:
        return False  # rewritten meanwhile (a zombie): the next delivery looks again
    except StreamCheckpointError as exc:
        log.warning("run %s: could not delete a leftover checkpoint: %s", run_id, exc)
        return True
    return False


class _Drive:
    """The state of one invocation."""

    def __init__(
        self,
        loop: RunLoop,
        run: RunState,
        keeper: LeaseKeeper,
        deadline: float | None,
        resume_delay: float | None,
    ) -> None:
        self.loop = loop
        self.store = loop.store
        self.run_state = run
        self.run_id = run.run_id
        self.epoch = run.lease.epoch
        self.keeper = keeper
        self.deadline = deadline
        self.resume_delay = resume_delay
        #: the run's agent (resolved when the drive starts)
        self.agent: Agent | None = None
        self.turns = 0
        self.tool_calls = 0
        #: characters the model streamed in this invocation (progress even when suspended)
        self.new_chars = 0
        self.repairs = 0
        self.checkpoint_left = False
        self.ended = False
        #: this invocation deleted the last turn's checkpoint: the next turn starts without
        #: reading it back (an object some zombie wrote since is met by the first put's
        #: condition, which the writer resolves like any other)
        self.checkpoint_gone = False

    def result(self, end: RunEnd, run: RunState | None = None, **kw: Any) -> RunResult:
        self.ended = True
        return RunResult(
            self.run_id,
            end,
            run if run is not None else self.run_state,
            turns_committed=self.turns,
            tool_calls=self.tool_calls,
            checkpoint_left=self.checkpoint_left,
            resume_delay=self.resume_delay,
            **kw,
        )

    def holds(self, run: RunState) -> bool:
        return run.lease.epoch == self.epoch and run.lease.owner == self.loop.worker_id

    async def confirm_owner(self) -> bool:
        """The run record's word: does this epoch still hold a live lease?"""
        run = await self.store.get_run(self.run_id)
        return self.holds(run) and run.lease.lease_until > self.loop._clock()

    async def fenced(self, detail: str, *, may_suspend: bool = True) -> RunResult:
        """A fence was seen somewhere: believe it only if the run record agrees."""
        await self.keeper.stop()
        try:
            current: RunState | None = await self.store.get_run(self.run_id)
        except ThreadStoreError as exc:
            log.warning("run %s: could not re-read the run after a fence: %s", self.run_id, exc)
            current = None
        if current is not None and self.holds(current) and may_suspend:
            # Nobody else drives the run: whatever fenced us was wrong. Hand the run over like
            # a suspension, so a fresh invocation starts clean.
            log.warning(
                "run %s: %s, but the run still carries epoch %d: handing it over",
                self.run_id,
                detail,
                self.epoch,
            )
            return await self.suspend()
        log.warning("run %s: fenced at epoch %d: %s", self.run_id, self.epoch, detail)
        await self.discard_own_checkpoint()
        result = self.result(RunEnd.FENCED, current, detail=detail)
        if current is None:
            # Not the run as this invocation last saw it (that would show our own lease):
            # nobody can tell who drives the run now, and the caller must keep its record.
            result = dataclasses.replace(result, run=None)
        return result

    async def discard_own_checkpoint(self) -> None:
        """A fenced writer leaves nothing behind: an object it wrote (its writer id and epoch)
        is deleted, conditionally on the version read, so a newer writer's is never touched.
        Without this a zombie's create after the run ended would stay for good."""
        try:
            stored = await self.loop.checkpoints.get(self.run_id)
        except StreamCheckpointError:
            return
        if stored is None:
            return
        saved = stored.checkpoint
        if saved.writer != self.loop.worker_id or saved.epoch != self.epoch:
            return
        log.info("run %s: deleting the checkpoint this fenced worker wrote", self.run_id)
        with contextlib.suppress(StreamCheckpointError):
            await self.loop.checkpoints.delete(self.run_id, expected_version=stored.version)

    def past_deadline(self, headroom: float = 0.0) -> bool:
        return self.deadline is not None and self.loop._monotonic() >= self.deadline - headroom

    def hand_over_before_turn(self) -> bool:
        """Too late to start a model turn: past the deadline, or (after some progress in this
        invocation) within ``turn_headroom`` of it. A turn cut at the deadline is resumed by
        a call that sends the thread again with the partial turn; handing over between steps
        costs only the next invocation (benchmarks/invocation_slicing.py)."""
        if self.past_deadline():
            return True
        return self.progressed and self.past_deadline(self.loop.turn_headroom)

    async def run(self) -> RunResult:
        from awaken_s3.agents import UnknownAgent

        try:
            self.agent = self.loop.app.agent_of(self.run_state.settings)
        except UnknownAgent as exc:
            # Removed or renamed by a deploy since the run was created: no worker can run it.
            return await self.finish(
                RunStatus.FAILED, ClassifiedError(UNKNOWN_AGENT, str(exc), retryable=False)
            )
        history = await self.store.load_messages(self.run_state.thread_id)
        if not history and self.run_state.message_count:
            raise ThreadNotFound(
                f"thread {self.run_state.thread_id} of run {self.run_id} has no messages"
            )
        # The claim returned the run as it stands: the first step needs no read of its own.
        claimed: RunState | None = self.run_state
        while True:
            if claimed is not None:
                current, claimed = claimed, None
            else:
                current = await self.store.get_run(self.run_id)
            if current.lease.epoch != self.epoch or self.keeper.lost.is_set():
                return await self.fenced(f"the run is at epoch {current.lease.epoch}")
            if current.status == RunStatus.CANCELLED:
                return await self.finish(RunStatus.CANCELLED, None)
            self.run_state = current
            if len(history) != current.message_count:
                history = await self.store.load_messages(current.thread_id)

            spent = budget_error(current.usage, current.settings.token_budget)
            if spent is not None:
                # Also for a run whose turn passed the budget before this build checked it.
                return await self.finish(RunStatus.FAILED, spent)
            pending = pending_tool_calls(history)
            if pending:
                outcome = await self.run_tools(pending)
                if isinstance(outcome, RunResult):
                    return outcome
                history.append(outcome)
                continue

            if current.turn >= current.settings.max_turns:
                error = ClassifiedError(
                    STEP_LIMIT,
                    f"the run reached its limit of {current.settings.max_turns} model turns",
                    retryable=False,
                )
                return await self.finish(RunStatus.FAILED, error)
            if self.hand_over_before_turn():
                return await self.suspend()

            try:
                request = self.request(current, history)
            except KeyError as exc:
                # The run asks for a tool this worker does not have: retrying cannot help.
                error = ClassifiedError(UNKNOWN_TOOL, str(exc.args[0]), retryable=False)
                return await self.finish(RunStatus.FAILED, error)
            if self.checkpoint_gone:
                existing: StoredCheckpoint | Any | None = None
                self.checkpoint_gone = False
            else:
                existing = await self.load_checkpoint(current)
            provider = None
            if self.loop.provider_for is not None:
                provider = await self.loop.provider_for(self.require_agent())
            turn = await self.while_leased(
                self.loop.runner.run_turn(
                    TurnRequest(
                        run_id=self.run_id,
                        thread_id=current.thread_id,
                        turn=current.turn,
                        epoch=self.epoch,
                        request=request,
                        deadline=self.deadline,
                        existing=existing,
                        confirm_owner=self.confirm_owner,
                        provider=provider,
                    )
                )
            )
            if turn is None:
                return await self.interrupted("the lease was lost during the turn")
            if isinstance(turn, TurnSuspended):
                self.new_chars += turn.new_chars
                return await self.suspend()
            if isinstance(turn, TurnFenced):
                if self.repairs < _MAX_REPAIRS and await self.still_ours():
                    # The runner could not confirm the lease (a failed read); the run record
                    # now says it is ours: run the turn again from what is stored.
                    self.repairs += 1
                    continue
                return await self.fenced(turn.detail)
            if isinstance(turn, TurnFailed):
                self.report_dropped(current.turn, turn.dropped_tool_calls)
                return await self.finish(RunStatus.FAILED, turn.error)
            committed = await self.commit_model_turn(current, turn)
            if isinstance(committed, RunResult):
                return committed
            history.append(turn.message)

    async def still_ours(self) -> bool:
        try:
            return await self.confirm_owner()
        except ThreadStoreError:
            return False

    async def interrupted(self, detail: str) -> RunResult:
        """The work in flight was abandoned: the run was cancelled, or the lease lost."""
        if self.keeper.cancelled.is_set():
            return await self.finish(RunStatus.CANCELLED, None)
        return await self.fenced(detail)

    async def while_leased(self, work: Awaitable[T]) -> T | None:
        """Await ``work``, abandoning it (None) as soon as a renewal finds the lease gone or
        the run cancelled: a model call that can never be committed is not worth paying for,
        and a tool call that can never be recorded is cancelled (its outcome is the next
        epoch's to judge)."""
        work_task = asyncio.ensure_future(work)
        lost_task = asyncio.ensure_future(self.keeper.lost.wait())
        cancel_task = asyncio.ensure_future(self.keeper.cancelled.wait())
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

    def require_agent(self) -> Agent:
        assert self.agent is not None, "the drive resolves its agent first"
        return self.agent

    def request(self, run: RunState, history: Sequence[Message]) -> ModelRequest:
        settings = run.settings
        registry = self.require_agent().registry
        return ModelRequest(
            model=settings.model,
            messages=request_messages(history),
            system=settings.system,
            tools=registry.specs(settings.tools) if settings.tools else (),
            max_tokens=settings.max_tokens,
            temperature=settings.temperature,
        )

    # -- checkpoints

    async def load_checkpoint(self, run: RunState) -> StoredCheckpoint | Any | None:
        try:
            stored = await self.loop.checkpoints.get(self.run_id)
        except StreamCheckpointError as exc:
            # The runner copes with a missing or corrupt checkpoint itself; let it load.
            log.warning("run %s: checkpoint load failed: %s", self.run_id, exc)
            return NOT_LOADED
        if stored is not None and stored.checkpoint.turn < run.turn:
            # Its turn is committed: the checkpoint is stale and is never replayed.
            log.info(
                "run %s: deleting a stale checkpoint of turn %d (run is at turn %d)",
                self.run_id,
                stored.checkpoint.turn,
                run.turn,
            )
            if await self.delete_checkpoint(stored.version):
                return None
            # Still there: the runner sees a checkpoint of another turn, which it never
            # replays, and replaces it conditionally with its first put.
            return stored
        return stored

    async def delete_turn_checkpoint(self, turn_index: int, turn: TurnCompleted) -> bool | None:
        """Delete the committed turn's checkpoint (see :mod:`awaken_s3.streaming.cleanup`);
        a put that outlasted the turn is awaited up to the deadline."""
        wait = LATE_PUT_WAIT
        if self.deadline is not None:
            wait = max(0.0, min(wait, self.deadline - self.loop._monotonic()))
        return await delete_turn_checkpoint(
            self.loop.checkpoints, self.run_id, turn_index, turn, late_put_wait=wait
        )

    async def delete_checkpoint(self, version: str) -> bool | None:
        return await delete_checkpoint(self.loop.checkpoints, self.run_id, version)

    # -- commits

    async def commit(self, commit: TurnCommit) -> RunState | RunResult:
        final = commit.final_status is not None
        if final:
            await self.keeper.stop()  # the commit releases the lease itself
        try:
            result = await self.store.commit_turn(commit)
        except CommitFenced as exc:
            return await self.fenced(str(exc), may_suspend=False)
        except ThreadMovedOn as exc:
            current = await self.store.get_run(self.run_id)
            if current.lease.epoch != self.epoch:
                return await self.fenced(str(exc), may_suspend=False)
            if current.status == RunStatus.CANCELLED:
                return await self.finish(RunStatus.CANCELLED, None)
            error = ClassifiedError(THREAD_MOVED_ON, str(exc), retryable=False)
            return await self.finish(RunStatus.FAILED, error)
        if result.duplicate:
            log.info("run %s: commit %s had already landed", self.run_id, commit.commit_id)
        self.run_state = result.run
        return result.run

    def report_dropped(self, turn: int, dropped_calls: Sequence[DroppedToolCall]) -> None:
        for dropped in dropped_calls:
            log.warning(
                "run %s turn %d: dropped incomplete tool call %s (%s): %s",
                self.run_id,
                turn,
                dropped.id,
                dropped.name,
                dropped.reason,
            )

    async def commit_model_turn(self, run: RunState, turn: TurnCompleted) -> RunState | RunResult:
        ending = turn_ending(turn)
        if ending.final_status is None:
            # A turn that passed the run's budget is committed (it was paid for) and ends the
            # run in the same write: no tool of it runs, no turn follows.
            spent = budget_error(run.usage + turn.usage, run.settings.token_budget)
            if spent is not None:
                ending = dataclasses.replace(ending, final_status=RunStatus.FAILED, error=spent)
        final = ending.final_status is not None
        self.report_dropped(run.turn, turn.dropped_tool_calls)
        committed = await self.commit(
            TurnCommit(
                base=run,
                messages=(turn.message,),
                usage=turn.usage,
                stop_reason=turn.stop_reason,
                final_status=ending.final_status,
                error=ending.error,
            )
        )
        if isinstance(committed, RunResult):
            return committed
        self.turns += 1
        if self.loop.listener is not None:
            self.loop.listener.turn_committed(committed, turn.message)
        # After the commit, never before: a crash in between leaves a stale checkpoint that
        # the next invocation (or the redelivery of an ended run) deletes without replaying.
        deleted = await self.delete_turn_checkpoint(run.turn, turn)
        self.checkpoint_gone = deleted is True and turn.checkpoint_stats.load_failures == 0
        if final and deleted is None:
            # Rewritten after our last put (an operator, a restore): the run has ended, so
            # whatever is there is stale; delete it at the version read.
            deleted = not await _clean_leftover(self.loop.checkpoints, self.run_id)
        if final:
            # A newer build's checkpoint this build left alone is stale now: reported as left,
            # for the sweeper (or a redelivery, finding the run ended) to delete.
            self.checkpoint_left = not deleted or turn.checkpoint_stats.newer_schema > 0
        if ending.final_status == RunStatus.FAILED:
            return self.result(RunEnd.FAILED, committed, error=ending.error)
        if final:
            return self.result(RunEnd.COMPLETED, committed)
        return committed

    def call_site(self) -> CallSite:
        run = self.run_state
        return CallSite(
            run_id=_callers_id(run.owner, run.run_id),
            thread_id=_callers_id(run.owner, run.thread_id),
            caller=run.owner,
            deadline=self.deadline,
            monotonic=self.loop._monotonic,
        )

    async def run_tools(self, calls: Sequence[ToolUseBlock]) -> Message | RunResult:
        """Run the turn's calls concurrently (the agent's bound; an exclusive tool alone) and
        commit their results in the model's order. A call not started by the deadline leaves
        the batch unfinished: the run hands over, and the next invocation answers the
        finished calls from their records and runs the rest."""
        agent = self.require_agent()
        registry = agent.registry
        site = self.call_site()

        async def one(call: ToolUseBlock) -> ToolResultBlock:
            return await execute_tool_call(
                self.store,
                registry,
                run_id=self.run_id,
                epoch=self.epoch,
                call=call,
                enabled=self.run_state.settings.tools,
                site=site,
            )

        def alone(call: ToolUseBlock) -> bool:
            tool = registry.get(call.name)
            return tool is not None and tool.exclusive

        if self.past_deadline():
            return await self.suspend()
        try:
            results = await self.while_leased(
                run_batch(
                    calls,
                    one,
                    limit=agent.max_parallel_tools,
                    exclusive=alone,
                    may_start=lambda: not self.past_deadline(),
                )
            )
        except (LeaseLost, ToolCallConflict) as exc:
            return await self.fenced(str(exc))
        if results is None:
            return await self.interrupted("the lease was lost while the tools ran")
        done = [block for block in results if block is not None]
        self.tool_calls += len(done)
        if len(done) < len(results):
            # Finished calls are recorded; the next invocation answers them from records.
            return await self.suspend()
        message = Message(role="user", content=tuple(done))
        committed = await self.commit(
            TurnCommit(base=self.run_state, messages=(message,), advance_turn=False)
        )
        if isinstance(committed, RunResult):
            return committed
        return message

    # -- endings

    async def finish(self, status: RunStatus, error: ClassifiedError | None) -> RunResult:
        await self.keeper.stop()
        try:
            run = await self.store.finish_run(
                self.run_id,
                worker=self.loop.worker_id,
                epoch=self.epoch,
                status=status,
                error=error,
            )
        except LeaseLost as exc:
            return await self.fenced(str(exc), may_suspend=False)
        await self.tidy_after_end()
        if run.status == RunStatus.CANCELLED:
            return self.result(RunEnd.CANCELLED, run)
        end = RunEnd.COMPLETED if run.status == RunStatus.COMPLETED else RunEnd.FAILED
        return self.result(end, run, error=run.error)

    async def tidy_after_end(self) -> None:
        """The run ended without a final commit (failed, cancelled): a partial turn saved
        before is of no use to anyone now. Deleted at the version read; when that fails, the
        sweeper deletes whatever is still there after its grace."""
        self.checkpoint_left = await _clean_leftover(self.loop.checkpoints, self.run_id)

    @property
    def progressed(self) -> bool:
        return self.turns > 0 or self.tool_calls > 0 or self.new_chars > 0

    async def suspend(self) -> RunResult:
        await self.keeper.stop()
        idle = 0 if self.progressed else self.run_state.idle_suspensions + 1
        if idle >= self.loop.max_idle_suspensions:
            error = ClassifiedError(
                NO_PROGRESS,
                f"the run was handed over {idle} times in a row without committing anything "
                "or streaming any text",
                retryable=False,
            )
            return await self.finish(RunStatus.FAILED, error)
        try:
            run = await self.store.release_lease(
                self.run_id, worker=self.loop.worker_id, epoch=self.epoch, idle_suspensions=idle
            )
        except LeaseLost as exc:
            return await self.fenced(str(exc), may_suspend=False)
        if run.status == RunStatus.CANCELLED:
            await self.tidy_after_end()
            return self.result(RunEnd.CANCELLED, run)
        log.info("run %s: suspended after %d turns", self.run_id, self.turns)
        return self.result(RunEnd.SUSPENDED, run)

    async def release_after_crash(self) -> None:
        """An unexpected error: let the next invocation take over at once (best effort)."""
        if self.ended:
            return
        try:
            await self.store.release_lease(
                self.run_id, worker=self.loop.worker_id, epoch=self.epoch
            )
        except (ThreadStoreError, LeaseLost) as exc:
            log.warning("run %s: could not release the lease: %s", self.run_id, exc)
