"""The two backends agree: the same history of lease, commit and sweep writes, replayed on the
in-memory store and on DynamoDB (the suite's moto server), answers and stores the same.

Both run one algorithm (awaken_s3.threads.persistence) over the same write data; this pins
that what differs between them, the evaluation of a condition, does not show: in particular
a release or finish of a run that ended while its worker held it, where the backends once
disagreed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken_s3.local.moto import MotoServer
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import InMemoryThreadStore, RunStatus, ThreadStoreError
from tests.fixtures.aws import aws_clients, dynamo_store, fresh_target
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import seed_run
from tests.threads.helpers import assistant_turn

LEASE = 30.0
ERROR = ClassifiedError("no_progress", "stuck", retryable=False)


Step = Callable[[Any, FakeClock], Coroutine[Any, Any, object]]


def _epoch(run: Any, stale: bool) -> int:
    return int(run.lease.epoch) - (1 if stale else 0)


def claim(worker: str) -> Step:
    async def step(store: Any, clock: FakeClock) -> object:
        return await store.claim_run("r1", worker=worker, lease_seconds=LEASE)

    return step


def renew(worker: str, stale: bool) -> Step:
    async def step(store: Any, clock: FakeClock) -> object:
        run = await store.get_run("r1")
        epoch = _epoch(run, stale)
        return await store.renew_lease("r1", worker=worker, epoch=epoch, lease_seconds=LEASE)

    return step


def release(worker: str, stale: bool) -> Step:
    async def step(store: Any, clock: FakeClock) -> object:
        run = await store.get_run("r1")
        return await store.release_lease(
            "r1", worker=worker, epoch=_epoch(run, stale), idle_suspensions=2
        )

    return step


def finish(worker: str, stale: bool) -> Step:
    async def step(store: Any, clock: FakeClock) -> object:
        run = await store.get_run("r1")
        return await store.finish_run(
            "r1", worker=worker, epoch=_epoch(run, stale), status=RunStatus.FAILED, error=ERROR
        )

    return step


def commit(final: bool) -> Step:
    async def step(store: Any, clock: FakeClock) -> object:
        run = await store.get_run("r1")
        return (await store.commit_turn(assistant_turn(run, "a turn", final=final))).run

    return step


async def cancel(store: Any, clock: FakeClock) -> object:
    return await store.cancel_run("r1")


async def rescue(store: Any, clock: FakeClock) -> object:
    run = await store.get_run("r1")
    return await store.mark_rescued(
        run, rescues=run.rescues + 1, fruitless=0, now=clock.now, next_in=5.0
    )


async def abandon(store: Any, clock: FakeClock) -> object:
    return await store.abandon_run(await store.get_run("r1"), error=ERROR, now=clock.now)


def wait(seconds: float) -> Step:
    async def step(store: Any, clock: FakeClock) -> object:
        clock.advance(seconds)
        return None

    return step


workers = st.sampled_from(["w1", "w2"])
steps = st.one_of(
    workers.map(claim),
    st.builds(renew, workers, st.booleans()),
    st.builds(release, workers, st.booleans()),
    st.builds(finish, workers, st.booleans()),
    st.builds(commit, st.booleans()),
    st.just(cancel),
    st.just(rescue),
    st.just(abandon),
    st.sampled_from([10.0, LEASE, 31.0, 90.0]).map(wait),
)


async def replay(store: Any, clock: FakeClock, history: list[Step]) -> list[object]:
    """What each step answered (a run, or the error's type), then what is stored."""
    await seed_run(store)
    answers: list[object] = []
    for step in history:
        try:
            answers.append(await step(store, clock))
        except ThreadStoreError as exc:
            answers.append(type(exc).__name__)
    answers.append(await store.get_run("r1"))
    answers.append(await store.stalled_runs(now=clock.now + 10_000))
    return answers


@pytest.fixture
async def moto_clients(moto_server: MotoServer) -> AsyncIterator[tuple[Any, Any, str]]:
    url = moto_server.endpoint_url
    async with aws_clients(url) as (db, s3):
        yield db, s3, url


ENDED_RUN_HISTORIES = [
    # a cancel lands while w1 holds the run: its release, and its finish, only drop the lease
    [claim("w1"), cancel, release("w1", False)],
    [claim("w1"), cancel, finish("w1", False)],
    # ... repeated (a retry whose first answer was lost), and by a stale epoch
    [claim("w1"), cancel, release("w1", False), release("w1", False), release("w1", True)],
    # a final commit ended it: a release after it is recognised, not a conflict
    [claim("w1"), commit(True), release("w1", False), finish("w1", False)],
    # the sweeper abandoned it, then its late worker tries to release and renew
    [claim("w1"), wait(90.0), abandon, release("w1", False), renew("w1", False)],
]


@pytest.mark.parametrize("history", ENDED_RUN_HISTORIES)
async def test_a_release_of_an_ended_run_is_the_same_on_both(
    history: list[Step], moto_clients: tuple[Any, Any, str]
) -> None:
    db, s3, url = moto_clients
    memory_clock, dynamo_clock = FakeClock(), FakeClock()
    target = await fresh_target(db, s3, url)
    dynamo = dynamo_store(db, s3, target, clock=dynamo_clock)
    on_memory = await replay(InMemoryThreadStore(clock=memory_clock), memory_clock, history)
    on_dynamo = await replay(dynamo, dynamo_clock, history)
    assert on_memory == on_dynamo
    ended = on_memory[-2]
    assert ended.status.terminal and ended.lease.owner is None  # type: ignore[attr-defined]
    assert ended.sweep_at is None  # type: ignore[attr-defined]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(history=st.lists(steps, min_size=1, max_size=10))
async def test_any_history_answers_and_stores_the_same_on_both(
    history: list[Step], moto_clients: tuple[Any, Any, str]
) -> None:
    db, s3, url = moto_clients
    memory_clock, dynamo_clock = FakeClock(), FakeClock()
    target = await fresh_target(db, s3, url)
    dynamo = dynamo_store(db, s3, target, clock=dynamo_clock)
    on_memory = await replay(InMemoryThreadStore(clock=memory_clock), memory_clock, history)
    assert on_memory == await replay(dynamo, dynamo_clock, history)
