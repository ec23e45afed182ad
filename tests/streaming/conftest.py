"""Fixtures of the streaming tests: fake time, a recording store, runner helpers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest

from awaken_s3.messages import Message
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.outcome import TurnOutcome
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import NOT_LOADED, TurnRunner
from awaken_s3.streaming.scripted import ScriptedProvider
from awaken_s3.streaming.turn_request import OwnerCheck, TurnRequest
from tests.fixtures.clock import FakeClock

RUN_ID = "run-1"
THREAD_ID = "thread-1"
HISTORY = (Message.user("What is the answer?"),)
REQUEST = ModelRequest(model="test-model", messages=HISTORY)


class RecordingSleep:
    """Records backoff delays instead of waiting; advances the fake clock."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.clock.advance(seconds)
        await asyncio.sleep(0)


class CountingStore(InMemoryStreamCheckpointStore):
    """The in-memory store, counting calls and keeping every body put."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0
        self.deletes = 0
        #: the ``expected_version`` of each delete (None: unconditional)
        self.deleted_versions: list[str | None] = []
        self.history: list[StreamCheckpoint] = []

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        self.gets += 1
        return await super().get(run_id)

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        version = await super().put(checkpoint, expected_version=expected_version)
        self.history.append(checkpoint)
        return version

    async def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        self.deletes += 1
        self.deleted_versions.append(expected_version)
        await super().delete(run_id, expected_version=expected_version)


@pytest.fixture
def sleep(clock: FakeClock) -> RecordingSleep:
    return RecordingSleep(clock)


@pytest.fixture
def store() -> CountingStore:
    return CountingStore()


#: write on every offer (no put in flight): makes checkpoint contents deterministic
EAGER = CheckpointPolicy(min_interval=0.0, min_bytes=0)


def make_runner(
    provider: ScriptedProvider,
    store: Any,
    clock: FakeClock,
    sleep: RecordingSleep,
    *,
    writer_id: str = "worker-a",
    retry: RetryPolicy | None = None,
    checkpoint: CheckpointPolicy | None = EAGER,
) -> TurnRunner:
    return TurnRunner(
        provider,
        store,
        writer_id=writer_id,
        retry_policy=retry or RetryPolicy(idle_timeout=5.0),
        checkpoint_policy=checkpoint,
        clock=clock,
        sleep=sleep,
        rng=random.Random(7),
    )


async def run(
    runner: TurnRunner,
    *,
    turn: int = 0,
    epoch: int = 1,
    request: ModelRequest = REQUEST,
    deadline: float | None = None,
    existing: Any = NOT_LOADED,
    confirm_owner: OwnerCheck | None = None,
) -> TurnOutcome:
    return await runner.run_turn(
        TurnRequest(
            run_id=RUN_ID,
            thread_id=THREAD_ID,
            turn=turn,
            epoch=epoch,
            request=request,
            deadline=deadline,
            existing=existing,
            confirm_owner=confirm_owner,
        )
    )


def saved(**fields: Any) -> StreamCheckpoint:
    """A checkpoint of turn 0 of the test run, as a crashed worker left it."""
    base: dict[str, Any] = {
        "run_id": RUN_ID,
        "thread_id": THREAD_ID,
        "model": "test-model",
        "turn": 0,
        "epoch": 1,
        "writer": "worker-dead",
    }
    base.update(fields)
    return StreamCheckpoint(**base)


async def eventually(predicate: Callable[[], bool]) -> None:
    """Yield to the loop until ``predicate`` holds (background puts are tasks)."""
    async with asyncio.timeout(5.0):
        while not predicate():  # noqa: ASYNC110 - the code under test exposes no event to await
            await asyncio.sleep(0.001)
