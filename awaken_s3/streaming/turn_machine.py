"""The turn as a state machine: what to do next, given what just happened (pure, no I/O).

:class:`TurnMachine` decides one model turn; :mod:`awaken_s3.streaming.runner` is the thin
async loop that performs each :data:`Action` and feeds back the :data:`Event` it produced,
in the manner of h11. Every transition is one row of :data:`TRANSITIONS`:

| phase        | event           | what follows                                                 |
|--------------|-----------------|--------------------------------------------------------------|
| LOADING      | Loaded          | fenced hint (a newer epoch's, the API's cancel mark) →       |
|              |                 | CONFIRMING; R2 → Complete; budget spent → Fail; resume →     |
|              |                 | OPENING (write first); fresh → OPENING                       |
| CONFIRMING   | OwnerAnswered   | not ours → Fence; ours → the checkpoint is used as any other |
| OPENING      | Opened          | fenced → Fence; else CALLING (or SUSPENDING at the deadline) |
| CALLING      | AttemptEnded    | completed → SETTLING; lost calls/retryable error →           |
|              |                 | RECOVERING or SYNTHESIZING; rejected prefill → CALLING again |
|              |                 | in the other form; permanent error → FAILING; deadline →     |
|              |                 | SUSPENDING; fenced → Fence                                   |
| SETTLING     | Flushed         | fenced → Fence; else Complete                                |
| SYNTHESIZING | Flushed         | fenced → Fence; else Complete (R2 in process)                |
| RECOVERING   | Flushed         | fenced → Fence; no retry left → Fail; the backoff crosses    |
|              |                 | the deadline → SUSPENDING; else SLEEPING                     |
| SLEEPING     | Slept           | CALLING (or SUSPENDING at the deadline)                      |
| SUSPENDING   | Flushed         | fenced → Fence; else Suspend                                 |
| FAILING      | Flushed         | Fail                                                         |

An event the current phase does not expect is a :class:`TurnProtocolError` (a driver bug).

Decisions kept here, all from the partial turn as a later process would see it:

* A resumed attempt (a checkpoint of this turn, not written by a clean suspension) counts
  as one interruption; the checkpoint is written back with the new count before the model
  is called again, so a process that keeps dying still exhausts the budget, and a zombie
  learns it is fenced before paying for a model call.
* In-process interruptions are planned exactly like a crash (:func:`plan_recovery` of the
  snapshot); an R2 completes the tool-use turn without another model call.
* A provider that rejects a prefill it claimed to support gets one immediate retry in the
  continue-message form; it is a different request, not a retry, and costs no budget.
* A stream that stops for tool use without one complete call is an interruption.
* Carried reasoning means thinking is on, and the APIs refuse a prefill then: such a prefix
  always goes out in the continue-message form (:mod:`awaken_s3.streaming.prefix_form` holds
  the form of the next request).
* Without a lease (``leased=False``: a caller with no run record) the epoch is taken one above
  the loaded checkpoint's, so the store's conditional writes alone fence the writer before.
* Every plan taken, from a checkpoint or in process, is appended to :attr:`resumes` for the
  driver to report (a live view shows the recovered text before the turn streams on).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from awaken_s3.errors import AwakenError
from awaken_s3.messages import Message
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.streaming.accumulator import StreamAccumulator
from awaken_s3.streaming.errors import ProviderError, ToolCallsLost
from awaken_s3.streaming.fate import Match, match_turn
from awaken_s3.streaming.fence import is_cancel_mark
from awaken_s3.streaming.outcome import ClassifiedError, DroppedToolCall, Usage
from awaken_s3.streaming.prefix_form import PrefixForm
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.recovery import (
    PlanKind,
    RecoveryPlan,
    never_empty,
    plan_recovery,
    synthesized_turn,
)
from awaken_s3.streaming.retry import RandomSource, RetryPolicy, budget_exhausted, classify, decide

log = logging.getLogger("awaken_s3.streaming")

#: retry code recorded for an attempt whose process was lost (crash, kill, timeout)
ATTEMPT_LOST: Final = "attempt_lost"


class Phase(enum.Enum):
    LOADING = "loading"
    CONFIRMING = "confirming"
    OPENING = "opening"
    CALLING = "calling"
    SETTLING = "settling"
    SYNTHESIZING = "synthesizing"
    RECOVERING = "recovering"
    SLEEPING = "sleeping"
    SUSPENDING = "suspending"
    FAILING = "failing"
    DONE = "done"


class TurnProtocolError(AwakenError, RuntimeError):
    """The driver fed an event the machine's phase does not expect."""


# -- events: what the driver reports ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Loaded:
    #: the checkpoint found (None: none, or none usable)
    stored: StoredCheckpoint | None
    #: False when whatever is stored is not known for sure (a failed or corrupt load, a
    #: delete that failed): the first put may meet an object it did not expect
    version_known: bool = True
    #: False when the stored object must be left alone (a newer build's checkpoint)
    checkpointing: bool = True


@dataclass(frozen=True, slots=True)
class OwnerAnswered:
    """The run record's answer: does our epoch still hold the lease?"""

    ours: bool


@dataclass(frozen=True, slots=True)
class Opened:
    fenced: bool
    now: float


#: how one model call ended: the stream completed, the deadline came, a checkpoint write
#: was fenced, or the exception that ended it
AttemptResult = str | BaseException


@dataclass(frozen=True, slots=True)
class AttemptEnded:
    result: AttemptResult
    now: float


@dataclass(frozen=True, slots=True)
class Flushed:
    fenced: bool
    now: float


@dataclass(frozen=True, slots=True)
class Slept:
    now: float


Event = Loaded | OwnerAnswered | Opened | AttemptEnded | Flushed | Slept

#: AttemptEnded.result values that are not errors
COMPLETED: Final = "completed"
DEADLINE: Final = "deadline"
FENCED: Final = "fenced"


# -- actions: what the driver does next ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Load:
    pass


@dataclass(frozen=True, slots=True)
class ConfirmOwner:
    pass


@dataclass(frozen=True, slots=True)
class OpenWriter:
    """Start checkpointing from ``version``; with ``write_first``, put the snapshot at once
    (a resume writes its new retry count before calling the model)."""

    version: str | None
    version_known: bool
    checkpointing: bool
    write_first: bool


@dataclass(frozen=True, slots=True)
class CallModel:
    request: ModelRequest


@dataclass(frozen=True, slots=True)
class Flush:
    """Wait for the put in flight; with ``write``, then put what is unsaved (``force``: even
    when nothing changed, e.g. to record a new retry count or the suspended flag)."""

    write: bool
    force: bool = False


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class Complete:
    message: Message
    stop_reason: str
    usage: Usage
    dropped: tuple[DroppedToolCall, ...]


@dataclass(frozen=True, slots=True)
class Suspend:
    pass


@dataclass(frozen=True, slots=True)
class Fail:
    error: ClassifiedError


@dataclass(frozen=True, slots=True)
class Fence:
    detail: str


Action = (
    Load | ConfirmOwner | OpenWriter | CallModel | Flush | Sleep | Complete | Suspend | Fail | Fence
)


@dataclass(frozen=True, slots=True)
class Resume:
    """A plan the turn took: from a checkpoint an earlier attempt left, or in process after
    an interruption (what a live view shows before the turn streams on)."""

    plan: RecoveryPlan
    #: True: planned from a checkpoint found at the start (another process's, or this
    #: one's before a restart); False: after an interruption within this call
    from_checkpoint: bool


@dataclass
class TurnMachine:
    run_id: str
    thread_id: str
    turn: int
    epoch: int
    writer_id: str
    #: the committed history and the model settings
    request: ModelRequest
    #: the adapter's prefill capability for the model (``form`` holds the form the next
    #: request takes)
    prefill: bool
    policy: RetryPolicy
    rng: RandomSource
    #: a monotonic instant by which the turn must suspend
    deadline: float | None = None
    provider_name: str = "provider"
    #: False: no run lease stands behind ``epoch``; the turn takes the epoch above the
    #: checkpoint it finds, so each resume fences every writer before it by the store alone
    leased: bool = True

    phase: Phase = field(default=Phase.LOADING, init=False)
    acc: StreamAccumulator = field(init=False)
    form: PrefixForm = field(init=False)
    retry_count: int = field(default=0, init=False)
    last_error: str | None = field(default=None, init=False)
    suspended: bool = field(default=False, init=False)
    #: the plan of the loaded checkpoint (None: a fresh turn), the caller's "how resumed"
    plan_kind: PlanKind | None = field(default=None, init=False)
    #: the plan of the latest resume, from a checkpoint or in process (for live views)
    last_plan: PlanKind | None = field(default=None, init=False)
    dropped: list[DroppedToolCall] = field(default_factory=list, init=False)
    #: every plan taken so far, in order (the driver reports each one as it comes)
    resumes: list[Resume] = field(default_factory=list, init=False)
    #: the version of the checkpoint loaded (the outcome's version until a writer exists)
    loaded_version: str | None = field(default=None, init=False)
    _saved: StreamCheckpoint | None = field(default=None, init=False)
    _loaded: Loaded | None = field(default=None, init=False)
    _pending_error: ClassifiedError | None = field(default=None, init=False)
    _pending_delay: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.form = PrefixForm(self.prefill)
        self.acc = StreamAccumulator(trim_echo=not self.prefill)

    # -- the driver's interface -----------------------------------------------------------

    def start(self, loaded: Loaded | None = None) -> Action:
        """The first action: Load, or (when the caller loaded already) what follows."""
        if loaded is None:
            return Load()
        return self.send(loaded)

    def send(self, event: Event) -> Action:
        handler = TRANSITIONS.get((self.phase, type(event)))
        if handler is None:
            raise TurnProtocolError(f"{type(event).__name__} is not expected while {self.phase}")
        return handler(self, event)

    def snapshot(self) -> StreamCheckpoint:
        return self.acc.snapshot(
            run_id=self.run_id,
            thread_id=self.thread_id,
            model=self.request.model,
            turn=self.turn,
            retry_count=self.retry_count,
            epoch=self.epoch,
            writer=self.writer_id,
            suspended=self.suspended,
            last_error=self.last_error,
            resumed_with=self.last_plan,
        )

    # -- terminal actions -----------------------------------------------------------------

    def _done(self, action: Action) -> Action:
        self.phase = Phase.DONE
        return action

    def _fence(self, detail: str) -> Action:
        log.warning("run %s turn %d: fenced: %s", self.run_id, self.turn, detail)
        return self._done(Fence(detail))

    def _fail(self, error: ClassifiedError) -> Action:
        return self._done(Fail(error))

    def _complete(self, *, synthesized: bool = False) -> Action:
        if synthesized:
            message = synthesized_turn(plan_recovery(self.snapshot()))
            _, now_dropped = self.acc.split_tool_calls()
            stop_reason = "tool_use"
        else:
            streamed, now_dropped = self.acc.message()
            # An empty completion is committed with a notice: never as an empty message.
            message = never_empty(streamed)
            assert self.acc.stop_reason is not None
            stop_reason = self.acc.stop_reason
        return self._done(
            Complete(message, stop_reason, self.acc.usage, (*self.dropped, *now_dropped))
        )

    def _suspend(self) -> Action:
        self.suspended = True
        self.phase = Phase.SUSPENDING
        return Flush(write=True, force=True)

    # -- transitions ----------------------------------------------------------------------

    def _on_loaded(self, event: Loaded) -> Action:
        self._loaded = event
        stored = event.stored
        if not self.leased and stored is not None:
            self.epoch = max(self.epoch, stored.checkpoint.epoch + 1)
        if stored is not None and (stored.checkpoint.epoch > self.epoch or is_cancel_mark(stored)):
            # A newer epoch's, or the API's cancel mark (created between our last read of the
            # run and this load): only the run record can say whether the turn may run.
            self.phase = Phase.CONFIRMING
            return ConfirmOwner()
        return self._use(stored)

    def _on_owner(self, event: OwnerAnswered) -> Action:
        assert self._loaded is not None and self._loaded.stored is not None
        saved = self._loaded.stored.checkpoint
        if not event.ours and is_cancel_mark(self._loaded.stored):
            return self._fence("the run was cancelled (the checkpoint carries the cancel's mark)")
        if not event.ours:
            return self._fence(
                f"the checkpoint was written under lease epoch {saved.epoch}, "
                f"newer than ours ({self.epoch})"
            )
        # The run record says no newer epoch exists (a restored table, a planted object):
        # the checkpoint is a hint like any other, replaced by our writes.
        log.warning(
            "run %s: the checkpoint carries epoch %d, above the run's %d; the run record "
            "says we hold it, so the checkpoint is replaced",
            self.run_id,
            saved.epoch,
            self.epoch,
        )
        return self._use(self._loaded.stored)

    def _use(self, stored: StoredCheckpoint | None) -> Action:
        loaded = self._loaded
        assert loaded is not None
        version_known = loaded.version_known
        resumed = False
        if stored is not None:
            saved = stored.checkpoint
            self.loaded_version = stored.version
            if match_turn(saved, turn=self.turn, thread_id=self.thread_id) is not Match.THIS_TURN:
                # Not the turn we run (stale, or another thread's, or ahead of us). Never
                # replay it; our first put replaces it conditionally (or creates it, if it was
                # deleted meanwhile: hence "uncertain").
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
                self.resumes.append(Resume(plan, from_checkpoint=True))
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
                    return self._done(
                        Complete(synthesized_turn(plan), "tool_use", Usage(), plan.dropped)
                    )
                if not saved.suspended:
                    self.retry_count += 1
                    self.last_error = ATTEMPT_LOST
                if self.retry_count > self.policy.max_interruptions:
                    return self._fail(budget_exhausted(self.retry_count, self.last_error))
                self.form.restart(self.acc, plan.prefix_text, plan.blocks)
                resumed = True
        self.phase = Phase.OPENING
        return OpenWriter(
            version=self.loaded_version,
            version_known=version_known,
            checkpointing=loaded.checkpointing,
            write_first=resumed,
        )

    def _on_opened(self, event: Opened) -> Action:
        if event.fenced:
            return self._fence("another writer replaced the checkpoint we resumed from")
        return self._next_call(event.now)

    def _next_call(self, now: float) -> Action:
        if self.deadline is not None and now >= self.deadline:
            return self._suspend()
        request = self.form.request(self.request, self.acc)
        self.phase = Phase.CALLING
        return CallModel(request)

    def _on_attempt(self, event: AttemptEnded) -> Action:
        result = event.result
        if result == COMPLETED:
            result = tool_calls_lost(self.acc, self.provider_name) or result
        if result == COMPLETED:
            self.phase = Phase.SETTLING
            return Flush(write=False)
        if result == FENCED:
            return self._fence("a conditional checkpoint write lost: another writer owns it")
        if result == DEADLINE:
            return self._suspend()
        assert isinstance(result, BaseException), result
        return self._on_error(result, event.now)

    def _on_error(self, error: BaseException, now: float) -> Action:
        classified = classify(error)
        if self.form.fall_back(error, self.acc):
            log.warning(
                "run %s: %s rejected the assistant prefix; continuing without prefill",
                self.run_id,
                self.provider_name,
            )
            return self._next_call(now)
        if not classified.retryable:
            if not isinstance(error, ProviderError):
                log.error(
                    "run %s: unexpected error from provider %s",
                    self.run_id,
                    self.provider_name,
                    exc_info=error,
                )
            self._pending_error = classified
            self.phase = Phase.FAILING
            return Flush(write=True)

        self.retry_count += 1
        self.last_error = classified.code
        decision = decide(self.policy, error, interruptions=self.retry_count, rng=self.rng)
        # Plan the partial exactly as a later process would plan its checkpoint.
        plan = plan_recovery(self.snapshot())
        self.last_plan = plan.kind
        self.resumes.append(Resume(plan, from_checkpoint=False))
        if plan.kind == "R2":
            self.phase = Phase.SYNTHESIZING
            return Flush(write=True, force=True)
        self.dropped.extend(plan.dropped)
        self.form.restart(self.acc, plan.prefix_text, plan.blocks)
        self._pending_error = None if decision.retry else decision.error
        self._pending_delay = decision.delay
        log.warning(
            "run %s turn %d: %s (interruption %d of %d), plan %s, retrying in %.2fs",
            self.run_id,
            self.turn,
            classified.code,
            self.retry_count,
            self.policy.max_interruptions,
            plan.kind,
            decision.delay,
        )
        self.phase = Phase.RECOVERING
        return Flush(write=True, force=True)

    def _on_settled(self, event: Flushed) -> Action:
        if event.fenced:
            return self._fence("the checkpoint was taken over while the turn finished")
        return self._complete()

    def _on_synthesized(self, event: Flushed) -> Action:
        if event.fenced:
            return self._fence("the checkpoint was taken over during recovery")
        return self._complete(synthesized=True)

    def _on_recovered(self, event: Flushed) -> Action:
        if event.fenced:
            return self._fence("the checkpoint was taken over during recovery")
        if self._pending_error is not None:
            return self._fail(self._pending_error)
        if self.deadline is not None and event.now + self._pending_delay >= self.deadline:
            return self._suspend()
        self.phase = Phase.SLEEPING
        return Sleep(self._pending_delay)

    def _on_slept(self, event: Slept) -> Action:
        return self._next_call(event.now)

    def _on_suspended(self, event: Flushed) -> Action:
        if event.fenced:
            return self._fence("a newer writer replaced the checkpoint during suspension")
        log.info("run %s turn %d suspended at the deadline", self.run_id, self.turn)
        return self._done(Suspend())

    def _on_failed(self, event: Flushed) -> Action:
        assert self._pending_error is not None
        return self._fail(self._pending_error)


def tool_calls_lost(acc: StreamAccumulator, provider: str) -> ToolCallsLost | None:
    """A tool-use stop without one complete call: an interruption, never an answer."""
    if acc.stop_reason != "tool_use":
        return None
    complete, dropped = acc.split_tool_calls()
    if complete:
        return None
    return ToolCallsLost(
        f"the model stopped for tool use but none of its {len(dropped)} tool calls was complete",
        provider=provider,
    )


# The event parameter is each handler's own event type; the table pairs them.
Handler = Callable[[TurnMachine, Any], Action]

#: (phase, event type) -> transition: every way the turn moves is a row here
TRANSITIONS: dict[tuple[Phase, type], Handler] = {
    (Phase.LOADING, Loaded): TurnMachine._on_loaded,
    (Phase.CONFIRMING, OwnerAnswered): TurnMachine._on_owner,
    (Phase.OPENING, Opened): TurnMachine._on_opened,
    (Phase.CALLING, AttemptEnded): TurnMachine._on_attempt,
    (Phase.SETTLING, Flushed): TurnMachine._on_settled,
    (Phase.SYNTHESIZING, Flushed): TurnMachine._on_synthesized,
    (Phase.RECOVERING, Flushed): TurnMachine._on_recovered,
    (Phase.SLEEPING, Slept): TurnMachine._on_slept,
    (Phase.SUSPENDING, Flushed): TurnMachine._on_suspended,
    (Phase.FAILING, Flushed): TurnMachine._on_failed,
}
