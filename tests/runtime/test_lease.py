"""The lease keeper renews while the loop works and notices when the lease is gone."""

from __future__ import annotations

import asyncio

import pytest

from awaken_s3.runtime.lease import LeaseKeeper, RunLease
from awaken_s3.threads import InMemoryThreadStore, LeaseUnavailable
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import seed_run


async def test_keeper_renews_on_schedule_and_reports_a_lost_lease() -> None:
    clock = FakeClock()
    store = InMemoryThreadStore(clock=clock)
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=30)
    ticks = asyncio.Queue[None]()
    waiting = asyncio.Queue[None]()  # the keeper is asleep (after its previous renewal)

    async def sleep(seconds: float) -> None:
        assert seconds == 10  # a third of the lease
        waiting.put_nowait(None)
        await ticks.get()
        clock.advance(seconds)

    keeper = LeaseKeeper(
        store, run_id="r1", worker="w1", epoch=run.lease.epoch, lease_seconds=30, sleep=sleep
    )
    async with keeper:
        await waiting.get()
        for _ in range(6):  # a minute of work, twice the lease
            ticks.put_nowait(None)
            await waiting.get()
        assert keeper.renewals == 6
        assert not keeper.lost.is_set()
        held = await store.get_run("r1")
        assert held.lease.lease_until == clock.now + 30
        with pytest.raises(LeaseUnavailable):
            await store.claim_run("r1", worker="w2", lease_seconds=30)
    # Another worker takes the run over (say this one stalled past its lease).
    clock.advance(31)
    await store.claim_run("r1", worker="w2", lease_seconds=30)
    assert not await keeper.renew_now()
    assert keeper.lost.is_set()


async def test_a_lease_check_that_finds_the_run_cancelled_stops_the_work_at_once() -> None:
    """The checkpoint writer asks the run record after a lost condition (the API's cancel
    mark refuses its put): finding the run cancelled answers no and abandons the work in
    flight, as a renewal finding it does, with no renewal due (the interval is an hour)."""
    clock = FakeClock()
    store = InMemoryThreadStore(clock=clock)
    await seed_run(store)
    lease = RunLease(store, "r1", worker="w1", lease_seconds=30, renew_every=3600, clock=clock)
    await lease.claim()
    try:
        assert await lease.confirm() is True
        started = asyncio.Event()

        async def model_call() -> str:
            started.set()
            await asyncio.Event().wait()  # streams until stopped
            return "never"

        work = asyncio.create_task(lease.while_held(model_call()))
        await started.wait()
        await store.cancel_run("r1")
        assert await lease.confirm() is False
        async with asyncio.timeout(30):  # a bound only a hung test reaches
            assert await work is None
        assert lease.cancelled and not lease.lost
    finally:
        await lease.stop_renewing()
