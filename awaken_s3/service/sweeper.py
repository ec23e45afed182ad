"""The sweeper: re-send runs that nobody drives, for whatever the queue lost.

A crashed worker's own record comes back a little after its lease (the worker keeps the
record's visibility in step with the lease), so crashes are resumed by the queue. The
sweeper is for the rest: a start message the API never managed to send, a continuation whose
send failed, a record that went to the dead-letter queue, an acknowledgement that should not
have been. It reads the sparse ``sweep`` index (runs not ended whose ``sweep_at`` is past:
nobody claimed, renewed or released them for a grace period), re-reads each run, and:

* re-sends it (reason ``rescue``, deduplicated per run, epoch and rescue count), then records
  the rescue with a write conditioned on the state it read, so concurrent sweepers never
  multiply messages and a run someone claimed meanwhile is left alone; while a run makes no
  progress, each re-send waits twice as long as the last (the grace, doubled, up to 32x), so
  a backlog (runs merely waiting behind others for a worker) gets few duplicates;
* fails it with ``abandoned`` after ``max_rescues`` fruitless rescues: re-sends after which a
  worker did claim the run and still committed nothing (a run that every worker crashes on
  must end, not loop). A re-send nobody has picked up yet never counts: a run waiting in a
  backlog is slow, not broken, and is never abandoned for it.

Sending before recording means an SQS outage never counts against a run: a rescue whose send
failed is simply tried again at the next sweep. A duplicate message (a send whose record
failed) is harmless: the worker that gets it finds the run held, handed over or ended.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from awaken_s3.failures import FailureCode
from awaken_s3.service.queue import RunMessage
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads.base import RunSweepStore
from awaken_s3.threads.errors import RunChanged, RunNotFound, ThreadStoreError
from awaken_s3.threads.models import RunState

log = logging.getLogger("awaken_s3.sweeper")

ABANDONED = FailureCode.ABANDONED

#: sends one run message; ``epoch`` and ``turn`` shape its deduplication id
Send = Callable[[RunMessage, int, int], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class Skip:
    reason: str


@dataclass(frozen=True, slots=True)
class Rescue:
    #: rescues in a row without progress, this one included
    rescues: int
    #: of those, the ones a worker claimed and still committed nothing after
    fruitless: int
    #: seconds until the sweeper may look again (the grace, doubled per rescue in a row)
    next_in: float


#: the longest back-off between two re-sends of a run that does not move, in graces
MAX_BACKOFF = 32


@dataclass(frozen=True, slots=True)
class Abandon:
    error: ClassifiedError


Verdict = Skip | Rescue | Abandon


def judge(run: RunState, *, now: float, max_rescues: int, grace: float) -> Verdict:
    """What the sweeper does with ``run`` as read (pure)."""
    if run.status.terminal:
        return Skip("ended")
    if run.sweep_at is None or run.sweep_at > now:
        return Skip("not due")  # the index lags the table: someone drove it meanwhile
    if run.lease.owner is not None and run.lease.lease_until > now:
        return Skip("held by a live lease")
    if run.rescue_mark != run.message_count:
        # Never rescued, or progress (a committed message) since: the count starts afresh.
        rescues, fruitless = 1, 0
    else:
        rescues = run.rescues + 1
        claimed_since = run.lease.epoch != run.rescue_epoch
        fruitless = run.fruitless_rescues + (1 if claimed_since else 0)
    if fruitless >= max_rescues:
        return Abandon(
            ClassifiedError(
                ABANDONED,
                f"the run was re-sent {rescues - 1} times; {fruitless} times a worker took it "
                "and committed nothing",
                retryable=False,
            )
        )
    return Rescue(rescues, fruitless, grace * min(MAX_BACKOFF, 2 ** (rescues - 1)))


@dataclass
class SweepReport:
    examined: int = 0
    rescued: int = 0
    #: rescues of runs a worker had taken since the last rescue and committed nothing:
    #: something keeps killing their workers (a backlog does not count)
    rescued_repeatedly: int = 0
    abandoned: int = 0
    skipped: int = 0
    send_failures: int = 0
    rescued_runs: list[str] = field(default_factory=list)


async def sweep(
    store: RunSweepStore,
    send: Send,
    *,
    now: float,
    max_rescues: int,
    grace: float,
    batch: int = 100,
) -> SweepReport:
    report = SweepReport()
    for run_id in await store.stalled_runs(now=now, limit=batch):
        report.examined += 1
        try:
            run = await store.get_run(run_id)
        except RunNotFound:
            report.skipped += 1
            continue
        verdict = judge(run, now=now, max_rescues=max_rescues, grace=grace)
        if isinstance(verdict, Skip):
            report.skipped += 1
            continue
        try:
            if isinstance(verdict, Abandon):
                await store.abandon_run(run, error=verdict.error, now=now)
                log.warning("run %s abandoned: %s", run_id, verdict.error.message)
                report.abandoned += 1
                continue
            message = RunMessage(run_id=run_id, reason="rescue")
            try:
                await send(message, run.lease.epoch, verdict.rescues)
            except Exception as exc:  # the next sweep tries again; nothing was recorded
                log.warning("run %s: the rescue message could not be sent: %s", run_id, exc)
                report.send_failures += 1
                continue
            await store.mark_rescued(
                run,
                rescues=verdict.rescues,
                fruitless=verdict.fruitless,
                now=now,
                next_in=verdict.next_in,
            )
        except RunChanged:
            report.skipped += 1  # claimed, rescued or ended since it was read
            continue
        except ThreadStoreError as exc:
            log.warning("run %s: the sweeper could not record its verdict: %s", run_id, exc)
            report.skipped += 1
            continue
        log.info("run %s rescued (%d in a row without progress)", run_id, verdict.rescues)
        report.rescued += 1
        report.rescued_runs.append(run_id)
        if verdict.fruitless > 0:
            report.rescued_repeatedly += 1
    return report
