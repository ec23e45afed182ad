from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from awaken_s3.runtime.loop import RunLoop
from awaken_s3.runtime.tools import ToolRegistry
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.provider import Provider
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads import InMemoryThreadStore
from awaken_s3.threads.base import ThreadStore
from tests.fixtures.aws import aws_clients, dynamo_store, fresh_target
from tests.fixtures.clock import FakeClock
from tests.runtime.serial_moto import serial_moto

LEASE = 30.0
#: checkpoint at every delta, so a crash anywhere leaves the partial behind
EAGER = CheckpointPolicy(min_interval=0.0, min_bytes=1)
FAST_RETRY = RetryPolicy(base_delay=0.0, max_delay=0.0, max_interruptions=5)


@pytest.fixture(scope="session")
def race_moto() -> Iterator[str]:
    """moto applying one request at a time, for tests where workers race (see serial_moto)."""
    with serial_moto() as url:
        yield url


@dataclass
class Backend:
    threads: ThreadStore
    checkpoints: StreamCheckpointStore


@pytest.fixture(params=["memory", "aws"])
async def backend(request: pytest.FixtureRequest, clock: FakeClock) -> AsyncIterator[Backend]:
    """In memory, or DynamoDB + S3 checkpoints on a moto server."""
    if request.param == "memory":
        yield Backend(InMemoryThreadStore(clock=clock), InMemoryStreamCheckpointStore())
        return
    url = request.getfixturevalue("moto_server").endpoint_url
    async with aws_clients(url) as (db, s3):
        target = await fresh_target(db, s3, url)
        yield Backend(
            dynamo_store(db, s3, target, clock=clock),
            S3StreamCheckpointStore(target.bucket, client=s3),
        )


@pytest.fixture
def threads(backend: Backend) -> ThreadStore:
    return backend.threads


@pytest.fixture
def checkpoints(backend: Backend) -> StreamCheckpointStore:
    return backend.checkpoints


LoopFactory = Callable[..., RunLoop]


def build_loop(
    store: ThreadStore,
    checkpoints: Any,
    provider: Provider,
    tools: ToolRegistry,
    *,
    worker: str,
    clock: Callable[[], float],
    lease_seconds: float = LEASE,
    renew_every: float | None = None,
    policy: CheckpointPolicy = EAGER,
    monotonic: Callable[[], float] = time.monotonic,
    turn_headroom: float = 0.0,
) -> RunLoop:
    runner = TurnRunner(
        provider,
        checkpoints,
        writer_id=worker,
        retry_policy=FAST_RETRY,
        checkpoint_policy=policy,
        clock=monotonic,
    )
    return RunLoop(
        store,
        runner,
        checkpoints,
        tools,
        worker_id=worker,
        lease_seconds=lease_seconds,
        renew_every=renew_every,
        clock=clock,
        monotonic=monotonic,
        turn_headroom=turn_headroom,
    )


@pytest.fixture
def make_loop(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock
) -> LoopFactory:
    def make(provider: Provider, tools: ToolRegistry, *, worker: str = "w1", **kw: Any) -> RunLoop:
        return build_loop(threads, checkpoints, provider, tools, worker=worker, clock=clock, **kw)

    return make
