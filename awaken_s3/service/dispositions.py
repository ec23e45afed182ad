"""What the worker does with a queue record once the run loop has returned (pure).

Acknowledging deletes the record; retrying fails it after setting its visibility, so SQS
delivers it again after ``delay`` seconds. The rule behind every row: a record is
acknowledged only when the run is ended, or has a message that will drive it (the
continuation the worker sends), or is held by another worker that is alive (its own record
comes back if it dies, because that worker keeps its record's visibility in step with its
lease; the sweeper covers the rest). Whenever that cannot be shown, the record is kept.

A record of an ended run is acknowledged whatever became of the run's leftover checkpoint:
a leftover is stale by definition (never replayed), and the sweeper deletes checkpoints that
outlived their runs. Keeping the record instead would walk it into the dead-letter queue
whenever S3 stays unreachable for a few deliveries, next to the records that need a person.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from awaken_s3.runtime.loop import RunEnd, RunResult
from awaken_s3.threads.models import RunState

#: a kept record comes back after at least this long (a run that cannot be read, a holder
#: whose lease has just run out): soon, but not in a tight loop
RETRY_SOON: Final = 5
#: SQS caps a visibility timeout at 12 hours; a record never needs to wait longer than this
MAX_DELAY: Final = 900


class Action(StrEnum):
    #: done with this record
    ACK = "ack"
    #: the run paused and released its lease: send a continuation, then acknowledge
    CONTINUE = "continue"
    #: keep the record: fail it so SQS delivers it again after ``delay`` seconds
    RETRY = "retry"


@dataclass(frozen=True, slots=True)
class Disposition:
    action: Action
    #: for RETRY: seconds until the record comes back
    delay: int = 0
    reason: str = ""


def holder_is_alive(run: RunState, *, now: float, lease_seconds: float) -> bool:
    """A holder renews every third of a lease, so a live one has at least about two thirds
    left; less than a third means it missed renewals and may be dead."""
    return run.lease.owner is not None and run.lease.lease_until - now >= lease_seconds / 3


def _until_expiry(run: RunState, now: float) -> int:
    return min(MAX_DELAY, max(RETRY_SOON, math.ceil(run.lease.lease_until - now) + 1))


def disposition(result: RunResult, *, now: float, lease_seconds: float) -> Disposition:
    end, run = result.end, result.run
    if end is RunEnd.SUSPENDED:
        return Disposition(Action.CONTINUE, reason="suspended: a continuation drives it")
    if end in (RunEnd.COMPLETED, RunEnd.FAILED, RunEnd.CANCELLED, RunEnd.NOT_RUNNABLE):
        if result.checkpoint_left:
            # Stale, never replayed: the sweeper's to delete (CheckpointLeftovers counts it).
            return Disposition(Action.ACK, reason="ended; its leftover checkpoint is the sweeper's")
        return Disposition(Action.ACK, reason="ended")
    # FENCED or BUSY: someone else's lease, as far as the run record shows.
    if run is None:
        return Disposition(Action.RETRY, RETRY_SOON, "the run could not be read")
    if run.status.terminal:
        return Disposition(Action.ACK, reason="ended")
    if run.lease.owner is None:
        # The other epoch released the run; whoever released it sent the message that
        # drives it (the sweeper re-sends it if that send was lost).
        return Disposition(Action.ACK, reason="released by its holder")
    if holder_is_alive(run, now=now, lease_seconds=lease_seconds):
        return Disposition(Action.ACK, reason="held by a live worker")
    return Disposition(
        Action.RETRY, _until_expiry(run, now), "held by a worker that stopped renewing"
    )


#: EMF metric name per run end
RUN_END_METRICS: dict[RunEnd, str] = {
    RunEnd.COMPLETED: "RunsCompleted",
    RunEnd.FAILED: "RunsFailed",
    RunEnd.CANCELLED: "RunsCancelled",
    RunEnd.SUSPENDED: "RunsSuspended",
    RunEnd.FENCED: "RunsFenced",
    RunEnd.BUSY: "RunsBusy",
    RunEnd.NOT_RUNNABLE: "RunsNotRunnable",
}
