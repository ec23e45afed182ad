"""How one invocation of the run loop ended: :class:`RunEnd` and :class:`RunResult`.

The worker handler decides what becomes of its queue record from this alone
(:func:`awaken_s3.service.dispositions.disposition`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads.models import RunState


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
