"""What the worker does with a queue record once the run loop has returned (pure).

Acknowledging means the record is deleted; failing it means SQS redelivers it after the
visibility timeout. Only outcomes that a later delivery can change are failed.
"""

from __future__ import annotations

from enum import StrEnum

from awaken_s3.runtime.loop import RunEnd


class Disposition(StrEnum):
    #: done with this message: the run ended, is someone else's, or cannot be run
    ACK = "ack"
    #: the run paused at the deadline: send a continuation, then acknowledge
    CONTINUE = "continue"
    #: another worker holds a live lease: fail the record so SQS redelivers it after the
    #: visibility timeout, by which time a dead holder's lease has expired
    RETRY = "retry"


_DISPOSITIONS: dict[RunEnd, Disposition] = {
    RunEnd.COMPLETED: Disposition.ACK,
    RunEnd.FAILED: Disposition.ACK,
    RunEnd.CANCELLED: Disposition.ACK,
    # A newer epoch drives the run and enqueues its own continuation.
    RunEnd.FENCED: Disposition.ACK,
    RunEnd.NOT_RUNNABLE: Disposition.ACK,
    RunEnd.SUSPENDED: Disposition.CONTINUE,
    RunEnd.BUSY: Disposition.RETRY,
}


def disposition(end: RunEnd) -> Disposition:
    return _DISPOSITIONS[end]


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
