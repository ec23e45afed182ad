"""The recovery paths: every way a run can be left undriven, what drives it again, and how long
that takes at most (pure).

A worker that dies cannot release anything, so each path ends when some message reaches a
worker that can claim the run. The bounds below are from the fault to the moment that
delivery is handed to a worker (SQS makes the record visible again, or the sweeper sends a
message); the receive, the worker's start and the claim come on top (on Lambda: a long poll
answered at once, an init of at most 10 s, one write). docs/THREADS.md ("Recovery paths")
holds the same table with the template's defaults; tests/infra checks that those defaults keep
every path within three lease periods and the common ones within two, and the kill soak
measures the paths it can produce (tests/soak, docs/RELIABILITY.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

#: the longest wait between two passes of the deployed sweeper (template.yaml: scheduled
#: every minute, EventBridge's shortest rate, with 4 passes 15 s apart per invocation)
SWEEP_PERIOD: Final = 15.0


class Path(StrEnum):
    #: died holding the lease (mid-stream, inside a tool, around a commit or a checkpoint
    #: write, out of memory, the function's timeout): its own record comes back
    HOLDER_DIED = "holder_died"
    #: died after its handler took the batch's visibility in hand, before the claim: the
    #: record comes back as for a holder
    BEFORE_CLAIM = "before_claim"
    #: stalled past its lease (a GC pause, a frozen container): its record comes back, and its
    #: late renewal is refused, so the next delivery claims the run at a new epoch
    STALLED = "stalled"
    #: died before its handler ran (the runtime's init, the first invocation's imports): only
    #: the queue's own visibility timeout brings the record back
    IN_INIT = "in_init"
    #: the record ran out of receives (``maxReceiveCount`` deaths in a row) and went to the
    #: dead-letter queue: the sweeper re-sends the run
    DEAD_LETTERED = "dead_lettered"
    #: no record will come back at all: a continuation whose send failed, a record another
    #: delivery acknowledged because the holder still looked alive, which then died; the
    #: sweeper re-sends the run
    MESSAGE_LOST = "message_lost"


#: what drives the run again on each path
DRIVER: Final[dict[Path, str]] = {
    Path.HOLDER_DIED: "its own record, hidden for lease + margin after the last renewal",
    Path.BEFORE_CLAIM: "its own record, hidden for lease + margin from the handler's start",
    Path.STALLED: "its own record (the late renewal is refused)",
    Path.IN_INIT: "its own record, after the queue's visibility timeout",
    Path.DEAD_LETTERED: "the sweeper, at its first pass after lease expiry + grace",
    Path.MESSAGE_LOST: "the sweeper, at its first pass after lease expiry (or release) + grace",
}


@dataclass(frozen=True, slots=True)
class Timing:
    """The settings the bounds follow from (seconds)."""

    lease: float
    visibility_margin: float
    sweep_grace: float
    #: the run queue's own VisibilityTimeout (template: the worker timeout + 30 s)
    queue_visibility: float
    sweep_period: float = SWEEP_PERIOD

    def bound(self, path: Path) -> float:
        """The longest time from the fault to the delivery that drives the run again."""
        if path in (Path.HOLDER_DIED, Path.BEFORE_CLAIM, Path.STALLED):
            # The last visibility the worker set (lease + margin) started at the latest at the
            # fault; its lease ran out before that.
            return self.lease + self.visibility_margin
        if path is Path.IN_INIT:
            return self.queue_visibility
        # The run is due at lease expiry + grace (sweep_at, set by the last claim or renewal;
        # a release sets it to the hand-over + grace, sooner), and the sweeper's next pass
        # comes within a period of that.
        return self.lease + self.sweep_grace + self.sweep_period

    def bound_in_leases(self, path: Path) -> float:
        return self.bound(path) / self.lease
