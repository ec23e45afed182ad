"""The sweeper's view of the run store, on every backend: the sparse index of runs that have
not ended, and the conditional writes that make exactly one sweeper act on a stalled run."""

from __future__ import annotations

from typing import cast

import pytest

from awaken_s3.messages import Message
from awaken_s3.service.queue import RunMessage
from awaken_s3.service.sweeper import ABANDONED, SweepReport, sweep
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import (
    RunActive,
    RunChanged,
    RunStatus,
    ThreadMovedOn,
    ThreadStore,
)
from awaken_s3.threads.base import RunSweepStore
from awaken_s3.threads.rules import DEFAULT_SWEEP_GRACE
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import OWNER, SETTINGS, seed_run
from tests.threads.helpers import assistant_turn, results_commit, tool_turn

LEASE = 30.0
GRACE = DEFAULT_SWEEP_GRACE


def sweeper(store: ThreadStore) -> RunSweepStore:
    assert isinstance(store, RunSweepStore)
    return cast(RunSweepStore, store)


sweep_store = sweeper


async def test_a_run_is_swept_only_once_nobody_drove_it_for_the_grace_period(
    store: ThreadStore, clock: FakeClock
) -> None:
    created = await seed_run(store)
    assert created.sweep_at == pytest.approx(clock() + GRACE)
    sweep = sweeper(store)
    assert await sweep.stalled_runs(now=clock()) == []
    # A queued run whose start message was lost comes up after the grace period.
    assert await sweep.stalled_runs(now=clock() + GRACE) == ["r1"]

    # Claims and renewals move it past the lease; a release (suspension) past the hand-over.
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    assert run.sweep_at == pytest.approx(clock() + LEASE + GRACE)
    clock.advance(LEASE / 2)
    renewed = await store.renew_lease("r1", worker="w1", epoch=1, lease_seconds=LEASE)
    assert renewed.sweep_at == pytest.approx(clock() + LEASE + GRACE)
    assert await sweep.stalled_runs(now=clock() + LEASE) == []
    assert await sweep.stalled_runs(now=clock() + LEASE + GRACE) == ["r1"]
    released = await store.release_lease("r1", worker="w1", epoch=1, idle_suspensions=2)
    assert released.sweep_at == pytest.approx(clock() + GRACE)
    assert released.idle_suspensions == 2
    assert (await store.get_run("r1")).idle_suspensions == 2


async def test_an_ended_run_leaves_the_index(store: ThreadStore, clock: FakeClock) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    await store.commit_turn(assistant_turn(run, "done", final=True))
    ended = await store.get_run("r1")
    assert (ended.status, ended.sweep_at) == (RunStatus.COMPLETED, None)
    assert await sweeper(store).stalled_runs(now=clock() + 10 * GRACE) == []

    await store.create_run("r2", thread_id="t1", owner=OWNER, settings=SETTINGS)
    assert (await store.cancel_run("r2")).sweep_at is None
    assert await sweeper(store).stalled_runs(now=clock() + 10 * GRACE) == []


async def test_a_claim_remembers_when_the_replaced_lease_ran_out(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)
    first = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    assert first.previous_lease_until == 0.0
    expiry = first.lease.lease_until
    clock.advance(LEASE + 5)  # w1 died without releasing
    second = await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    assert second.previous_lease_until == pytest.approx(expiry)
    await store.release_lease("r1", worker="w2", epoch=second.lease.epoch)
    third = await store.claim_run("r1", worker="w3", lease_seconds=LEASE)
    assert third.previous_lease_until == 0.0  # released, not abandoned


async def test_exactly_one_sweeper_rescues_a_stalled_run(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)
    seen = await store.get_run("r1")
    now = clock() + GRACE
    rescued = await sweeper(store).mark_rescued(
        seen, rescues=1, fruitless=0, now=now, next_in=GRACE
    )
    assert (rescued.rescues, rescued.rescue_mark, rescued.rescue_epoch) == (
        1,
        seen.message_count,
        seen.lease.epoch,
    )
    assert rescued.sweep_at == pytest.approx(now + GRACE)
    # A second sweeper that read the same state loses: one message per stall, never two.
    with pytest.raises(RunChanged):
        await sweeper(store).mark_rescued(seen, rescues=1, fruitless=0, now=now, next_in=GRACE)
    assert await sweeper(store).stalled_runs(now=now) == []


async def test_a_sweeper_never_touches_a_run_someone_claimed_meanwhile(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)
    seen = await store.get_run("r1")
    clock.advance(GRACE)
    await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    with pytest.raises(RunChanged):
        await sweeper(store).mark_rescued(seen, rescues=1, fruitless=0, now=clock(), next_in=GRACE)
    error = ClassifiedError("abandoned", "nobody drove it", retryable=False)
    with pytest.raises(RunChanged):
        await sweeper(store).abandon_run(seen, error=error, now=clock())
    assert (await store.get_run("r1")).status == RunStatus.RUNNING


async def test_an_abandoned_run_fails_with_the_classified_error(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    clock.advance(LEASE + GRACE)  # w1 died; nobody came back
    seen = await store.get_run("r1")
    error = ClassifiedError("abandoned", "nobody drove it", retryable=False)
    failed = await sweeper(store).abandon_run(seen, error=error, now=clock())
    assert (failed.status, failed.error, failed.lease.owner, failed.sweep_at) == (
        RunStatus.FAILED,
        error,
        None,
        None,
    )
    # The dead worker's late commit cannot revive it.
    with pytest.raises(ThreadMovedOn):
        await store.commit_turn(assistant_turn(run, "late"))


async def test_one_live_run_per_thread(store: ThreadStore) -> None:
    await seed_run(store)
    with pytest.raises(RunActive) as active:
        await store.create_run("r2", thread_id="t1", owner=OWNER, settings=SETTINGS)
    assert active.value.run_id == "r1"
    # A retried create of the active run itself is still answered with that run.
    again = await store.create_run(
        "r1", thread_id="t1", owner=OWNER, settings=SETTINGS, messages=[Message.user("hi")]
    )
    assert again.run_id == "r1"
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    await store.commit_turn(assistant_turn(run, "done", final=True))
    second = await store.create_run("r2", thread_id="t1", owner=OWNER, settings=SETTINGS)
    assert second.status == RunStatus.QUEUED
    assert (await store.get_thread("t1")).active_run == "r2"


# -- the sweep itself (awaken_s3.service.sweeper) over each backend


class Outbox:
    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple[RunMessage, int, int]] = []
        self.fail = fail

    async def __call__(self, message: RunMessage, epoch: int, rescues: int) -> object:
        if self.fail:
            raise ConnectionError("injected: SQS unreachable")
        self.sent.append((message, epoch, rescues))
        return "sent"


async def sweep_at(store: ThreadStore, now: float, outbox: Outbox) -> SweepReport:
    return await sweep(sweep_store(store), outbox, now=now, max_rescues=2, grace=GRACE)


async def test_a_run_nobody_picks_up_is_re_sent_with_back_off_and_never_abandoned(
    store: ThreadStore, clock: FakeClock
) -> None:
    # A lost start message, or a backlog: the run is never claimed between re-sends. That is
    # slow, not broken: it is re-sent, each time twice as late, and never failed for it.
    await seed_run(store)  # its start message was never sent
    outbox = Outbox()
    report = await sweep_at(store, clock(), outbox)
    assert (report.examined, report.rescued) == (0, 0)  # not due yet

    waits = []
    for _ in range(6):
        run = await store.get_run("r1")
        assert run.sweep_at is not None
        waits.append(round(run.sweep_at - clock()))
        clock.advance(run.sweep_at - clock())
        report = await sweep_at(store, clock(), outbox)
        assert (report.rescued, report.abandoned, report.rescued_repeatedly) == (1, 0, 0)
        # A second sweep right after (or a concurrent one) sends nothing more.
        assert (await sweep_at(store, clock(), outbox)).rescued == 0
    assert waits == [GRACE, GRACE, 2 * GRACE, 4 * GRACE, 8 * GRACE, 16 * GRACE]
    assert [(m.run_id, m.reason, epoch) for m, epoch, _ in outbox.sent] == [("r1", "rescue", 0)] * 6
    assert (await store.get_run("r1")).status == RunStatus.QUEUED


async def test_a_run_every_worker_fails_on_is_abandoned_after_fruitless_rescues(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)  # its start message was never sent
    outbox = Outbox()
    for attempt in range(3):
        run = await store.get_run("r1")
        assert run.sweep_at is not None
        clock.advance(run.sweep_at - clock())
        report = await sweep_at(store, clock(), outbox)
        if attempt < 2:
            assert (report.rescued, report.rescued_repeatedly) == (1, attempt)
            # A worker takes the re-sent run and dies before committing anything.
            await store.claim_run("r1", worker=f"doomed-{attempt}", lease_seconds=10)
            clock.advance(10)
    assert report.abandoned == 1 and len(outbox.sent) == 2
    run = await store.get_run("r1")
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.code == ABANDONED
    assert await sweep_store(store).stalled_runs(now=clock() + 100 * GRACE) == []


async def test_progress_between_rescues_starts_the_count_afresh(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)  # its start message was never sent
    outbox = Outbox()
    for _ in range(4):
        run = await store.get_run("r1")
        assert run.sweep_at is not None
        clock.advance(run.sweep_at - clock())
        assert (await sweep_at(store, clock(), outbox)).abandoned == 0
        # Each time a worker takes it, commits a tool turn, then its messages get lost.
        claimed = await store.claim_run("r1", worker="w", lease_seconds=10)
        committed = await store.commit_turn(tool_turn(claimed, call_id=f"c{claimed.lease.epoch}"))
        results = results_commit(committed.run, call_id=f"c{claimed.lease.epoch}")
        await store.commit_turn(results)
        clock.advance(10)
    assert (await store.get_run("r1")).status == RunStatus.RUNNING


async def test_an_sqs_outage_never_counts_against_a_run(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)  # its start message was never sent
    sweeper = sweep_store(store)
    for _ in range(5):
        clock.advance(GRACE)
        report = await sweep(sweeper, Outbox(fail=True), now=clock(), max_rescues=2, grace=GRACE)
        assert (report.send_failures, report.abandoned) == (1, 0)
    outbox = Outbox()
    report = await sweep(sweeper, outbox, now=clock(), max_rescues=2, grace=GRACE)
    assert report.rescued == 1 and outbox.sent[0][2] == 1


async def test_a_crashed_worker_s_run_is_rescued_only_after_its_lease_and_the_grace(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)  # its start message was never sent
    await store.claim_run("r1", worker="died", lease_seconds=60)
    sweeper = sweep_store(store)
    clock.advance(60 + GRACE - 1)
    assert (await sweep(sweeper, Outbox(), now=clock(), max_rescues=5, grace=GRACE)).rescued == 0
    clock.advance(1)
    outbox = Outbox()
    assert (await sweep(sweeper, outbox, now=clock(), max_rescues=5, grace=GRACE)).rescued == 1
    assert outbox.sent[0][1] == 1  # deduplicated per epoch: the dead worker's
