"""The run as a state machine: what one invocation does next, given what just happened (pure).

:class:`RunMachine` decides one worker invocation of one run; :mod:`awaken_s3.runtime.loop` is
the thin async driver that performs each :data:`Action` and feeds back the :data:`Event` it
produced, as :mod:`awaken_s3.streaming.turn_machine` does for one model turn. Every transition
is one row of :data:`TRANSITIONS`:

| phase            | event               | what follows                                        |
|------------------|---------------------|-----------------------------------------------------|
| CLAIMING         | Claimed             | unknown agent → Finish failed; else LoadHistory     |
|                  | ClaimRefused        | ended → SettleCheckpoint (its leftover); else Exit  |
|                  |                     | busy                                                |
| CLEARING_LEFTOVER| CheckpointSettled   | Exit not_runnable                                   |
| LOADING          | HistoryLoaded       | no messages where the run has some → Crash          |
|                  |                     | (ThreadNotFound); else the step                     |
| READING          | RunRead             | the step                                            |
| RELOADING        | HistoryLoaded       | the step, from its budget check on                  |
| RUNNING_TOOLS    | ToolsRan            | a call the run cannot get past → Finish failed;     |
|                  |                     | refused or lease lost → CheckFence; abandoned for a |
|                  |                     | cancel → ReadRun; a call not started (or timed out) |
|                  |                     | → the hand-over; else Commit the results            |
| TURNING          | TurnEnded           | lease lost → CheckFence; abandoned for a cancel →   |
|                  |                     | ReadRun; suspended → the hand-over;                 |
|                  |                     | fenced by a cancel's mark → ReadRun; other fences → |
|                  |                     | ConfirmOwner (repairs left) or CheckFence;          |
|                  |                     | failed → Finish failed; completed → Commit          |
| CONFIRMING       | OwnerAnswered       | ours → ReadRun (the turn again); else CheckFence    |
| COMMITTING_TURN  | Committed           | ClearTurnCheckpoint                                 |
| COMMITTING_TOOLS | Committed           | ReadRun                                             |
| COMMITTING_*     | Refused             | CheckFence, believed (no hand-over)                 |
|                  | MovedOn             | ReadRun (MOVED_ON)                                  |
| MOVED_ON         | RunRead             | another epoch → CheckFence, believed; cancelled →   |
|                  |                     | Finish cancelled; else Finish failed thread_moved_on|
| CLEARING_TURN    | TurnCheckpointCleared | the run goes on → ReadRun; final and rewritten →  |
|                  |                     | SettleCheckpoint (the ended run's); final → Exit    |
| CLEARING_FINAL   | CheckpointSettled   | Exit completed or failed                            |
| FINISHING        | Finished            | SettleCheckpoint (the ended run's)                  |
|                  | Refused             | CheckFence, believed                                |
| RELEASING        | Released            | cancelled meanwhile → SettleCheckpoint; else Exit   |
|                  |                     | suspended                                           |
|                  | Refused             | CheckFence, believed                                |
| TIDYING          | CheckpointSettled   | Exit with the ended run's status                    |
| FENCE_CHECKING   | FenceChecked        | the run record still says ours (and the fence was   |
|                  |                     | only a hint) → the hand-over; else SettleCheckpoint |
|                  |                     | (what this fenced worker wrote)                     |
| DISCARDING       | CheckpointSettled   | Exit fenced                                         |
| every phase      | Faulted             | Crash: the lease released while it is ours          |

**The step**, on each fresh read of the run: another epoch or a lost lease → CheckFence;
cancelled → Finish cancelled; history behind the run → LoadHistory; the token budget spent →
Finish failed; tool calls without results → RunTools (past the deadline: the hand-over); the
step limit → Finish failed; too late for a model turn → the hand-over; a tool this worker does
not have → Finish failed; else RunTurn. **The hand-over**: after too many hand-overs in a row
without progress → Finish failed ``no_progress``; else Release (the caller then sends the
continuation). An event the phase does not expect is a :class:`RunProtocolError`.

Liveness: the terminal actions are :class:`Exit` and :class:`Crash`, and every path to them
leaves the run ended, or released with a message that drives it (the continuation a
suspension asks for, the queue record a crash or an unconfirmed fence keeps), or owned by a
live newer epoch, as the run record showed (tests/runtime/test_run_liveness.py holds that over
every state and fault).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from awaken_s3.errors import AwakenError
from awaken_s3.failures import FailureCode
from awaken_s3.messages import Message, ToolResultBlock, ToolUseBlock
from awaken_s3.runtime.endings import TurnEnding, budget_error, run_ending
from awaken_s3.runtime.history import request_messages
from awaken_s3.runtime.run_result import RunEnd, RunResult
from awaken_s3.streaming.cleanup import LATE_PUT_WAIT, Cleared
from awaken_s3.streaming.fate import FencedWriter, Judge, RunRecord
from awaken_s3.streaming.outcome import (
    ClassifiedError,
    DroppedToolCall,
    TurnCompleted,
    TurnFailed,
    TurnFenced,
    TurnOutcome,
    TurnSuspended,
)
from awaken_s3.streaming.provider import ModelRequest, ToolSpec
from awaken_s3.threads.errors import ThreadNotFound
from awaken_s3.threads.models import RunState, RunStatus, TurnCommit
from awaken_s3.threads.rules import holds_lease

log = logging.getLogger("awaken_s3.runtime")

STEP_LIMIT: Final = FailureCode.STEP_LIMIT
THREAD_MOVED_ON: Final = FailureCode.THREAD_MOVED_ON
UNKNOWN_TOOL: Final = FailureCode.UNKNOWN_TOOL
UNKNOWN_AGENT: Final = FailureCode.UNKNOWN_AGENT
NO_PROGRESS: Final = FailureCode.NO_PROGRESS
#: suspensions in a row without progress after which a run fails (see RunLoop)
DEFAULT_MAX_IDLE_SUSPENSIONS: Final = 5
#: checkpoint fences an invocation repairs in place before it hands the run over
MAX_REPAIRS: Final = 2


def pending_tool_calls(history: Sequence[Message]) -> tuple[ToolUseBlock, ...]:
    """Tool calls of a committed assistant turn whose results are not committed yet."""
    if not history or history[-1].role != "assistant":
        return ()
    return history[-1].tool_uses


class RunProtocolError(AwakenError, RuntimeError):
    """The driver fed an event the machine's phase does not expect."""


class Phase(enum.Enum):
    CLAIMING = "claiming"
    CLEARING_LEFTOVER = "clearing the leftover"
    LOADING = "loading the history"
    READING = "reading the run"
    RELOADING = "reloading the history"
    RUNNING_TOOLS = "running tools"
    TURNING = "running a turn"
    CONFIRMING = "confirming the owner"
    COMMITTING_TURN = "committing a turn"
    COMMITTING_TOOLS = "committing tool results"
    MOVED_ON = "reading a run whose thread moved on"
    CLEARING_TURN = "clearing the turn's checkpoint"
    CLEARING_FINAL = "clearing the final checkpoint"
    FINISHING = "finishing"
    RELEASING = "releasing"
    TIDYING = "tidying after the end"
    FENCE_CHECKING = "checking a fence"
    DISCARDING = "discarding the fenced checkpoint"
    DONE = "done"


# -- events: what the driver reports ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claimed:
    run: RunState
    #: the wall clock at the claim
    now: float
    #: why no agent of the app can run the run (removed by a deploy), or None
    agent_problem: str | None = None
    #: the run's tools as its agent declares them (sent with every model request)
    tools: tuple[ToolSpec, ...] = ()
    #: why the run's tools cannot be sent (one the agent does not have), or None
    tools_problem: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimRefused:
    """Another lease holds the run, or it ended; ``run`` as read after the refusal."""

    run: RunState
    now: float
    detail: str


@dataclass(frozen=True, slots=True)
class CheckpointSettled:
    #: something is still stored after the verdict was performed
    left: bool


@dataclass(frozen=True, slots=True)
class HistoryLoaded:
    messages: tuple[Message, ...]
    #: the monotonic clock (the deadline's)
    now: float
    lease_lost: bool = False


@dataclass(frozen=True, slots=True)
class RunRead:
    run: RunState
    now: float
    lease_lost: bool = False


@dataclass(frozen=True, slots=True)
class ToolsRan:
    #: each call's result in the model's order (None: not started by the deadline); None:
    #: the lease was lost while they ran
    results: tuple[ToolResultBlock | None, ...] | None
    #: a claim the ledger refused (another epoch), or None
    refused: str | None = None
    #: the calls were abandoned because a renewal found the run cancelled
    cancelled: bool = False
    #: a call the run cannot get past (a record of another call, time-outs on every
    #: attempt): the run fails with this error
    failed: ClassifiedError | None = None


@dataclass(frozen=True, slots=True)
class TurnEnded:
    #: None: the lease was lost, or the run cancelled, while the turn ran (it was abandoned)
    outcome: TurnOutcome | None
    #: the run was found cancelled while the turn ran (by a renewal, or by the lease check of
    #: a checkpoint writer whose put the cancel's mark refused): a turn abandoned or fenced
    #: for it is not a fence to judge; the step reads the run and ends it
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class OwnerAnswered:
    ours: bool


@dataclass(frozen=True, slots=True)
class Committed:
    run: RunState


@dataclass(frozen=True, slots=True)
class Refused:
    """The run record refused this epoch's write (a commit, a finish, a release)."""

    detail: str


@dataclass(frozen=True, slots=True)
class MovedOn:
    """The commit found the thread moved on (another run appended, or the run changed)."""

    detail: str


@dataclass(frozen=True, slots=True)
class TurnCheckpointCleared:
    cleared: Cleared


@dataclass(frozen=True, slots=True)
class Finished:
    run: RunState


@dataclass(frozen=True, slots=True)
class Released:
    run: RunState


@dataclass(frozen=True, slots=True)
class FenceChecked:
    #: the run record after a fence; None when it could not be read
    run: RunState | None


@dataclass(frozen=True, slots=True)
class Faulted:
    """The action raised something unexpected (the driver re-raises it)."""


Event = (
    Claimed
    | ClaimRefused
    | CheckpointSettled
    | HistoryLoaded
    | RunRead
    | ToolsRan
    | TurnEnded
    | OwnerAnswered
    | Committed
    | Refused
    | MovedOn
    | TurnCheckpointCleared
    | Finished
    | Released
    | FenceChecked
    | Faulted
)

# -- actions: what the driver does next ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    pass


@dataclass(frozen=True, slots=True)
class SettleCheckpoint:
    """Read the checkpoint, judge it as ``judge`` and perform the verdict."""

    judge: Judge


@dataclass(frozen=True, slots=True)
class LoadHistory:
    pass


@dataclass(frozen=True, slots=True)
class ReadRun:
    pass


@dataclass(frozen=True, slots=True)
class RunTools:
    calls: tuple[ToolUseBlock, ...]
    run: RunState


@dataclass(frozen=True, slots=True)
class RunTurn:
    turn: int
    thread_id: str
    request: ModelRequest
    #: False: this invocation deleted the last turn's checkpoint, so there is none to read
    read_checkpoint: bool


@dataclass(frozen=True, slots=True)
class ConfirmOwner:
    pass


@dataclass(frozen=True, slots=True)
class Commit:
    """Commit; with a ``final_status`` the commit itself ends the run and its lease."""

    commit: TurnCommit


@dataclass(frozen=True, slots=True)
class ClearTurnCheckpoint:
    turn: int
    thread_id: str
    outcome: TurnCompleted


@dataclass(frozen=True, slots=True)
class Finish:
    """Stop renewing, then end the run."""

    status: RunStatus
    error: ClassifiedError | None


@dataclass(frozen=True, slots=True)
class Release:
    """Stop renewing, then release the lease (the run is handed over)."""

    #: hand-overs in a row without progress, this one included (0 after progress)
    idle: int


@dataclass(frozen=True, slots=True)
class CheckFence:
    """Stop renewing, then re-read the run: a fence is believed only if it agrees."""

    detail: str


@dataclass(frozen=True, slots=True)
class Exit:
    result: RunResult


@dataclass(frozen=True, slots=True)
class Crash:
    """Stop; release the lease first when ``release``; raise ``error`` (None: what the
    action raised)."""

    release: bool
    error: BaseException | None = None


Action = (
    Claim
    | SettleCheckpoint
    | LoadHistory
    | ReadRun
    | RunTools
    | RunTurn
    | ConfirmOwner
    | Commit
    | ClearTurnCheckpoint
    | Finish
    | Release
    | CheckFence
    | Exit
    | Crash
)
TERMINAL: Final = (Exit, Crash)


def _error(code: str, message: str) -> ClassifiedError:
    return ClassifiedError(code, message, retryable=False)


def _end_of(run: RunState) -> RunEnd:
    if run.status == RunStatus.CANCELLED:
        return RunEnd.CANCELLED
    return RunEnd.COMPLETED if run.status == RunStatus.COMPLETED else RunEnd.FAILED


def _report_dropped(run_id: str, turn: int, dropped_calls: Sequence[DroppedToolCall]) -> None:
    for dropped in dropped_calls:
        log.warning(
            "run %s turn %d: dropped incomplete tool call %s (%s): %s",
            run_id,
            turn,
            dropped.id,
            dropped.name,
            dropped.reason,
        )


@dataclass
class Tally:
    """What this invocation did, for its :class:`RunResult`."""

    turns: int = 0
    tool_calls: int = 0
    #: characters the model streamed in this invocation (progress even when suspended)
    new_chars: int = 0
    checkpoint_left: bool = False
    resume_delay: float | None = None

    @property
    def progressed(self) -> bool:
        return self.turns > 0 or self.tool_calls > 0 or self.new_chars > 0

    def result(self, run_id: str, end: RunEnd, run: RunState | None, **kw: Any) -> RunResult:
        return RunResult(
            run_id,
            end,
            run,
            turns_committed=self.turns,
            tool_calls=self.tool_calls,
            checkpoint_left=self.checkpoint_left,
            resume_delay=self.resume_delay,
            **kw,
        )


def _model_request(
    run: RunState, history: Sequence[Message], tools: Sequence[ToolSpec]
) -> ModelRequest:
    settings = run.settings
    return ModelRequest(
        model=settings.model,
        messages=request_messages(history),
        system=settings.system,
        tools=tuple(tools) if settings.tools else (),
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
    )


def _no_progress(idle: int) -> ClassifiedError:
    return _error(
        NO_PROGRESS,
        f"the run was handed over {idle} times in a row without committing anything or "
        "streaming any text",
    )


@dataclass
class RunExits:
    """Every way out of an invocation: finish the run, hand it over, judge a fence by the
    run record, exit, crash. :class:`RunMachine` adds what the run does meanwhile."""

    run_id: str
    worker_id: str
    lease_seconds: float
    #: a monotonic instant by which the invocation hands the run over
    deadline: float | None = None
    max_idle_suspensions: int = DEFAULT_MAX_IDLE_SUSPENSIONS
    #: seconds before the deadline after which an invocation that made progress hands the
    #: run over instead of starting another model turn or tool call
    turn_headroom: float = 0.0

    phase: Phase = field(default=Phase.CLAIMING, init=False)
    epoch: int = field(default=0, init=False)
    #: the lease is this invocation's: a crash releases it
    holding: bool = field(default=False, init=False)
    tally: Tally = field(default_factory=Tally, init=False)
    _run: RunState | None = field(default=None, init=False)
    _detail: str = field(default="", init=False)
    _may_hand_over: bool = field(default=True, init=False)
    _fenced_run: RunState | None = field(default=None, init=False)

    @property
    def run(self) -> RunState:
        assert self._run is not None, "the run is known from the claim on"
        return self._run

    def holds(self, run: RunState) -> bool:
        return holds_lease(run, self.worker_id, self.epoch)

    def past_deadline(self, now: float, headroom: float = 0.0) -> bool:
        return self.deadline is not None and now >= self.deadline - headroom

    def too_late_to_start(self, now: float) -> bool:
        """Past the deadline, or (after some progress) within the headroom of it: no model
        turn and no tool call starts then. A tool call is cut at the deadline, and a cut
        non-idempotent call can only be answered "outcome unknown", so one started with
        seconds left would lose its answer where the next invocation, with its whole time,
        runs it; an invocation that made no progress starts anyway (a hand-over could only
        repeat)."""
        return self.past_deadline(now) or (
            self.tally.progressed and self.past_deadline(now, self.turn_headroom)
        )

    def late_put_wait(self, now: float) -> float:
        """How long the delete after a commit waits for a put that outlasted its turn."""
        if self.deadline is None:
            return LATE_PUT_WAIT
        return max(0.0, min(LATE_PUT_WAIT, self.deadline - now))

    # -- terminal actions -----------------------------------------------------------------

    def _exit(self, end: RunEnd, run: RunState | None, **kw: Any) -> Action:
        self.phase = Phase.DONE
        return Exit(self.tally.result(self.run_id, end, run, **kw))

    def _crash(self, error: BaseException | None = None) -> Action:
        self.phase = Phase.DONE
        return Crash(release=self.holding, error=error)

    def _on_fault(self, event: Faulted) -> Action:
        return self._crash()

    # -- commits the run record refused ---------------------------------------------------

    def _on_refused(self, event: Refused) -> Action:
        return self._check_fence(event.detail, may_hand_over=False)

    def _on_moved_on(self, event: MovedOn) -> Action:
        self._detail = event.detail
        self.phase = Phase.MOVED_ON
        return ReadRun()

    def _on_moved_on_read(self, event: RunRead) -> Action:
        if event.run.lease.epoch != self.epoch:
            return self._check_fence(self._detail, may_hand_over=False)
        if event.run.status == RunStatus.CANCELLED:
            return self._finish(RunStatus.CANCELLED, None)
        # Another run appended to the thread: this run's view can never become current.
        return self._finish(RunStatus.FAILED, _error(THREAD_MOVED_ON, self._detail))

    # -- endings ----------------------------------------------------------------------------

    def _read(self) -> Action:
        self.phase = Phase.READING
        return ReadRun()

    def _settle(self, phase: Phase, judge: Judge) -> Action:
        self.phase = phase
        return SettleCheckpoint(judge)

    def _finish(self, status: RunStatus, error: ClassifiedError | None) -> Action:
        self.phase = Phase.FINISHING
        return Finish(status, error)

    def _on_finished(self, event: Finished) -> Action:
        # The run ended without a final commit (failed, cancelled): a partial turn saved
        # before is of no use to anyone now.
        self._run, self.holding = event.run, False
        return self._settle(Phase.TIDYING, RunRecord(event.run))

    def _on_tidied(self, event: CheckpointSettled) -> Action:
        self.tally.checkpoint_left = event.left
        end = _end_of(self.run)
        return self._exit(end, self.run, error=None if end is RunEnd.CANCELLED else self.run.error)

    def _hand_over(self) -> Action:
        idle = 0 if self.tally.progressed else self.run.idle_suspensions + 1
        if idle >= self.max_idle_suspensions:
            return self._finish(RunStatus.FAILED, _no_progress(idle))
        self.phase = Phase.RELEASING
        return Release(idle)

    def _on_released(self, event: Released) -> Action:
        self._run, self.holding = event.run, False
        if event.run.status == RunStatus.CANCELLED:
            return self._settle(Phase.TIDYING, RunRecord(event.run))
        log.info("run %s: suspended after %d turns", self.run_id, self.tally.turns)
        return self._exit(RunEnd.SUSPENDED, event.run)

    def _check_fence(self, detail: str, *, may_hand_over: bool = True) -> Action:
        self._detail, self._may_hand_over = detail, may_hand_over
        self.phase = Phase.FENCE_CHECKING
        return CheckFence(detail)

    def _on_fence_checked(self, event: FenceChecked) -> Action:
        run = event.run
        if run is not None and self.holds(run) and self._may_hand_over:
            # Nobody else drives the run: whatever fenced us was wrong. Hand the run over
            # like a suspension, so a fresh invocation starts clean.
            log.warning(
                "run %s: %s, but the run still carries epoch %d: handing it over",
                self.run_id,
                self._detail,
                self.epoch,
            )
            return self._hand_over()
        log.warning("run %s: fenced at epoch %d: %s", self.run_id, self.epoch, self._detail)
        self._fenced_run = run
        # Another holder, as read: nothing of the lease is ours to release. Unread: a crash
        # still releases it, conditionally on our epoch (best effort).
        self.holding = self.holding and (run is None or self.holds(run))
        # A fenced writer leaves nothing behind: an object it wrote (its writer id and
        # epoch) is deleted at the version read, so a newer writer's is never touched.
        return self._settle(Phase.DISCARDING, FencedWriter(self.worker_id, self.epoch))

    def _on_discarded(self, event: CheckpointSettled) -> Action:
        # Without a readable run record nobody can tell who drives the run now (not the
        # run as this invocation last saw it, which would show our own lease).
        return self._exit(RunEnd.FENCED, self._fenced_run, detail=self._detail)


@dataclass
class RunMachine(RunExits):
    """One invocation of one run: claim, steps (tools, model turns, commits), exits."""

    history: tuple[Message, ...] = field(default=(), init=False)
    repairs: int = field(default=0, init=False)
    #: this invocation deleted the last turn's checkpoint: the next turn does not read it (an
    #: object some zombie wrote since is met by the first put's condition)
    checkpoint_gone: bool = field(default=False, init=False)
    _tools: tuple[ToolSpec, ...] = field(default=(), init=False)
    _tools_problem: str | None = field(default=None, init=False)
    _turn: TurnCompleted | None = field(default=None, init=False)
    _ending: TurnEnding = field(default=TurnEnding(None), init=False)
    _results: Message | None = field(default=None, init=False)

    def start(self) -> Action:
        return Claim()

    def send(self, event: Event) -> Action:
        handler = TRANSITIONS.get((self.phase, type(event)))
        if handler is None:
            raise RunProtocolError(f"{type(event).__name__} is not expected while {self.phase}")
        return handler(self, event)

    # -- the claim ------------------------------------------------------------------------

    def _on_claimed(self, event: Claimed) -> Action:
        run = self._run = event.run
        self.epoch, self.holding = run.lease.epoch, True
        if run.previous_lease_until > 0:
            # The previous holder never released the run: it died (or lost its lease) after
            # its last renewal, which set the lease it left to expire at previous_lease_until.
            last_renewal = run.previous_lease_until - self.lease_seconds
            self.tally.resume_delay = max(0.0, event.now - last_renewal)
        self._tools, self._tools_problem = event.tools, event.tools_problem
        if event.agent_problem is not None:
            # Removed or renamed by a deploy since the run was created: no worker can run it.
            return self._finish(RunStatus.FAILED, _error(UNKNOWN_AGENT, event.agent_problem))
        self.phase = Phase.LOADING
        return LoadHistory()

    def _on_claim_refused(self, event: ClaimRefused) -> Action:
        run = event.run
        if run.status.runnable:
            wait = max(0.0, run.lease.lease_until - event.now)
            return self._exit(RunEnd.BUSY, run, detail=event.detail, retry_after=wait)
        # Ended before this invocation: a crash between its final commit and the checkpoint
        # delete leaves a stale checkpoint, deleted here as a courtesy.
        self._run, self._detail = run, event.detail
        return self._settle(Phase.CLEARING_LEFTOVER, RunRecord(run))

    def _on_leftover(self, event: CheckpointSettled) -> Action:
        self.tally.checkpoint_left = event.left
        return self._exit(RunEnd.NOT_RUNNABLE, self.run, detail=self._detail)

    # -- each step, from the run as read ----------------------------------------------------

    def _on_history(self, event: HistoryLoaded) -> Action:
        self.history = event.messages
        if not event.messages and self.run.message_count:
            return self._crash(
                ThreadNotFound(f"thread {self.run.thread_id} of run {self.run_id} has no messages")
            )
        # The claim returned the run as it stands: the first step needs no read of its own.
        return self._step(self.run, event.now, event.lease_lost)

    def _on_run_read(self, event: RunRead) -> Action:
        return self._step(event.run, event.now, event.lease_lost)

    def _step(self, run: RunState, now: float, lease_lost: bool) -> Action:
        if run.lease.epoch != self.epoch or lease_lost:
            return self._check_fence(f"the run is at epoch {run.lease.epoch}")
        if run.status == RunStatus.CANCELLED:
            return self._finish(RunStatus.CANCELLED, None)
        self._run = run
        if len(self.history) != run.message_count:
            self.phase = Phase.RELOADING
            return LoadHistory()
        return self._next(now)

    def _on_reloaded(self, event: HistoryLoaded) -> Action:
        self.history = event.messages
        return self._next(event.now)

    def _next(self, now: float) -> Action:
        run = self.run
        settings = run.settings
        spent = budget_error(run.usage, settings.token_budget)
        if spent is not None:
            # Also for a run whose turn passed the budget before this build checked it.
            return self._finish(RunStatus.FAILED, spent)
        pending = pending_tool_calls(self.history)
        if pending:
            if self.past_deadline(now):
                return self._hand_over()
            self.phase = Phase.RUNNING_TOOLS
            return RunTools(pending, run)
        if run.turn >= settings.max_turns:
            limit = f"the run reached its limit of {settings.max_turns} model turns"
            return self._finish(RunStatus.FAILED, _error(STEP_LIMIT, limit))
        # A turn cut at the deadline is resumed by a call that sends the thread again;
        # handing over between steps costs only the next invocation.
        if self.too_late_to_start(now):
            return self._hand_over()
        if self._tools_problem is not None:
            # The run asks for a tool this worker does not have: retrying cannot help.
            return self._finish(RunStatus.FAILED, _error(UNKNOWN_TOOL, self._tools_problem))
        request = _model_request(run, self.history, self._tools)
        read, self.checkpoint_gone = not self.checkpoint_gone, False
        self.phase = Phase.TURNING
        return RunTurn(run.turn, run.thread_id, request, read_checkpoint=read)

    # -- tools --------------------------------------------------------------------------------

    def _on_tools(self, event: ToolsRan) -> Action:
        if event.failed is not None:
            return self._finish(RunStatus.FAILED, event.failed)
        if event.refused is not None:
            return self._check_fence(event.refused)
        if event.results is None:
            if event.cancelled:
                return self._read()  # the step finds the run cancelled and ends it
            return self._check_fence("the lease was lost while the tools ran")
        done = tuple(block for block in event.results if block is not None)
        self.tally.tool_calls += len(done)
        if len(done) < len(event.results):
            # Finished calls are recorded; the next invocation answers them from records.
            return self._hand_over()
        self._results = Message(role="user", content=done)
        self.phase = Phase.COMMITTING_TOOLS
        return Commit(TurnCommit(base=self.run, messages=(self._results,), advance_turn=False))

    def _on_tools_committed(self, event: Committed) -> Action:
        assert self._results is not None
        self._run, self.history = event.run, (*self.history, self._results)
        return self._read()

    # -- model turns ------------------------------------------------------------------------

    def _on_turn(self, event: TurnEnded) -> Action:
        match event.outcome:
            case None if event.cancelled:
                return self._read()  # the step finds the run cancelled and ends it
            case None:
                return self._check_fence("the lease was lost during the turn")
            case TurnSuspended(new_chars=new_chars):
                self.tally.new_chars += new_chars
                return self._hand_over()
            case TurnFenced() if event.cancelled:
                return self._read()  # the cancel's mark fenced the writer: the step ends it
            case TurnFenced(detail=detail):
                if self.repairs < MAX_REPAIRS:
                    # The runner could not confirm the lease (a failed read): ask again, and
                    # if the run is ours, run the turn again from what is stored.
                    self._detail, self.phase = detail, Phase.CONFIRMING
                    return ConfirmOwner()
                return self._check_fence(detail)
            case TurnFailed(error=error, dropped_tool_calls=dropped):
                _report_dropped(self.run_id, self.run.turn, dropped)
                return self._finish(RunStatus.FAILED, error)
        assert isinstance(event.outcome, TurnCompleted)
        return self._commit_turn(event.outcome)

    def _on_owner(self, event: OwnerAnswered) -> Action:
        if not event.ours:
            return self._check_fence(self._detail)
        self.repairs += 1
        return self._read()

    def _commit_turn(self, turn: TurnCompleted) -> Action:
        run = self.run
        ending = run_ending(turn, run.usage, run.settings.token_budget)
        _report_dropped(self.run_id, run.turn, turn.dropped_tool_calls)
        self._turn, self._ending = turn, ending
        self.phase = Phase.COMMITTING_TURN
        commit = TurnCommit(
            base=run,
            messages=(turn.message,),
            usage=turn.usage,
            stop_reason=turn.stop_reason,
            final_status=ending.final_status,
            error=ending.error,
        )
        return Commit(commit)

    def _on_turn_committed(self, event: Committed) -> Action:
        assert self._turn is not None
        committed_turn = self.run.turn
        self._run = event.run
        self.tally.turns += 1
        if self._ending.final_status is not None:
            self.holding = False  # the final commit released the lease
        # After the commit, never before: a crash in between leaves a stale checkpoint that
        # the next invocation (or the redelivery of an ended run) deletes without replaying.
        self.phase = Phase.CLEARING_TURN
        return ClearTurnCheckpoint(committed_turn, event.run.thread_id, self._turn)

    def _on_turn_cleared(self, event: TurnCheckpointCleared) -> Action:
        turn = self._turn
        assert turn is not None
        gone = event.cleared is Cleared.GONE
        self.checkpoint_gone = gone and turn.checkpoint_stats.load_failures == 0
        if self._ending.final_status is None:
            self.history = (*self.history, turn.message)
            return self._read()
        if event.cleared is Cleared.REWRITTEN:
            # Rewritten after our last put (an operator, a restore): the run has ended, so
            # whatever is there is stale; judged and deleted at the version read.
            return self._settle(Phase.CLEARING_FINAL, RunRecord(self.run))
        return self._after_final(deleted=gone)

    def _on_final_cleared(self, event: CheckpointSettled) -> Action:
        return self._after_final(deleted=not event.left)

    def _after_final(self, *, deleted: bool) -> Action:
        assert self._turn is not None
        # A newer build's checkpoint this build left alone is stale now: reported as left,
        # for the sweeper (or a redelivery, finding the run ended) to delete.
        self.tally.checkpoint_left = not deleted or self._turn.checkpoint_stats.newer_schema > 0
        if self._ending.final_status == RunStatus.FAILED:
            return self._exit(RunEnd.FAILED, self.run, error=self._ending.error)
        return self._exit(RunEnd.COMPLETED, self.run)


# The event parameter is each handler's own event type; the table pairs them.
Handler = Callable[[RunMachine, Any], Action]

#: (phase, event type) -> transition: every way the run moves is a row here
TRANSITIONS: dict[tuple[Phase, type], Handler] = {
    (Phase.CLAIMING, Claimed): RunMachine._on_claimed,
    (Phase.CLAIMING, ClaimRefused): RunMachine._on_claim_refused,
    (Phase.CLEARING_LEFTOVER, CheckpointSettled): RunMachine._on_leftover,
    (Phase.LOADING, HistoryLoaded): RunMachine._on_history,
    (Phase.READING, RunRead): RunMachine._on_run_read,
    (Phase.RELOADING, HistoryLoaded): RunMachine._on_reloaded,
    (Phase.RUNNING_TOOLS, ToolsRan): RunMachine._on_tools,
    (Phase.TURNING, TurnEnded): RunMachine._on_turn,
    (Phase.CONFIRMING, OwnerAnswered): RunMachine._on_owner,
    (Phase.COMMITTING_TURN, Committed): RunMachine._on_turn_committed,
    (Phase.COMMITTING_TURN, Refused): RunMachine._on_refused,
    (Phase.COMMITTING_TURN, MovedOn): RunMachine._on_moved_on,
    (Phase.COMMITTING_TOOLS, Committed): RunMachine._on_tools_committed,
    (Phase.COMMITTING_TOOLS, Refused): RunMachine._on_refused,
    (Phase.COMMITTING_TOOLS, MovedOn): RunMachine._on_moved_on,
    (Phase.MOVED_ON, RunRead): RunMachine._on_moved_on_read,
    (Phase.CLEARING_TURN, TurnCheckpointCleared): RunMachine._on_turn_cleared,
    (Phase.CLEARING_FINAL, CheckpointSettled): RunMachine._on_final_cleared,
    (Phase.FINISHING, Finished): RunMachine._on_finished,
    (Phase.FINISHING, Refused): RunMachine._on_refused,
    (Phase.RELEASING, Released): RunMachine._on_released,
    (Phase.RELEASING, Refused): RunMachine._on_refused,
    (Phase.TIDYING, CheckpointSettled): RunMachine._on_tidied,
    (Phase.FENCE_CHECKING, FenceChecked): RunMachine._on_fence_checked,
    (Phase.DISCARDING, CheckpointSettled): RunMachine._on_discarded,
    **{(phase, Faulted): RunMachine._on_fault for phase in Phase if phase is not Phase.DONE},
}
