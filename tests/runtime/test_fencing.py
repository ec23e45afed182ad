"""A worker whose lease expired is fenced by the storage: on its next checkpoint write (S3
ETag) and on its commit (DynamoDB epoch condition). Deterministic: the zombie is paused
mid-turn on a gate while a second worker takes the run over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from awaken_s3.messages import Message
from awaken_s3.runtime.loop import RunEnd
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.threads import DynamoThreadStore, LeaseUnavailable, RunStatus
from tests.fixtures.aws import aws_clients, fresh_target
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import seed_run
from tests.runtime.conftest import EAGER, build_loop
from tests.runtime.scripts import (
    Effects,
    TurnAwareProvider,
    adding_registry,
    expected_thread,
    tool_turns,
)

LEASE = 30.0
PROMPT = "add things up"


class Env:
    def __init__(self, threads: DynamoThreadStore, s3: Any, bucket: str, clock: FakeClock) -> None:
        self.threads = threads
        self.checkpoints = S3StreamCheckpointStore(bucket, client=s3)
        self.clock = clock


@pytest.fixture
async def env(race_moto: str) -> AsyncIterator[Env]:
    url = race_moto
    async with aws_clients(url) as (db, s3):
        target = await fresh_target(db, s3, url)
        clock = FakeClock()
        threads = DynamoThreadStore(
            target.table, client=db, s3_client=s3, bucket=target.bucket, clock=clock
        )
        await seed_run(threads, prompt=PROMPT)
        yield Env(threads, s3, target.bucket, clock)


async def zombie_scenario(env: Env, zombie_policy: CheckpointPolicy) -> tuple[Any, Any, Effects]:
    turns = tool_turns(1)
    paused = asyncio.Event()
    resume = asyncio.Event()

    async def pause(turn: int, index: int) -> None:
        if turn == 0 and index == 3 and not resume.is_set():
            paused.set()
            await resume.wait()

    effects = Effects()
    zombie = build_loop(
        env.threads,
        env.checkpoints,
        TurnAwareProvider(turns, pause=pause),
        adding_registry(effects),
        worker="zombie",
        clock=env.clock,
        renew_every=0,
        policy=zombie_policy,
    )
    live = build_loop(
        env.threads,
        env.checkpoints,
        TurnAwareProvider(turns),
        adding_registry(effects),
        worker="live",
        clock=env.clock,
    )
    zombie_task = asyncio.create_task(zombie.run("r1"))
    await paused.wait()  # the zombie is mid-turn (and has checkpointed, when enabled)
    env.clock.advance(LEASE + 1)  # its lease expired: a GC pause, a frozen container...
    live_result = await live.run("r1")
    resume.set()
    return await zombie_task, live_result, effects


async def test_zombie_is_fenced_on_its_next_checkpoint_write(env: Env) -> None:
    zombie, live, effects = await zombie_scenario(env, EAGER)
    assert live.end == RunEnd.COMPLETED
    assert zombie.end == RunEnd.FENCED
    assert "checkpoint" in zombie.detail
    messages = await env.threads.load_messages("t1")
    assert messages == expected_thread(PROMPT, tool_turns(1), ["1"])
    assert effects.all() == ["add:0"]
    assert await env.checkpoints.get("r1") is None
    run = await env.threads.get_run("r1")
    assert run.status == RunStatus.COMPLETED and run.lease.epoch == 2


async def test_zombie_is_fenced_on_its_commit(env: Env) -> None:
    # Without checkpoints the zombie streams its whole turn; the commit is what stops it.
    zombie, live, effects = await zombie_scenario(env, CheckpointPolicy(enabled=False))
    assert live.end == RunEnd.COMPLETED
    assert zombie.end == RunEnd.FENCED
    assert "epoch" in zombie.detail
    assert await env.threads.load_messages("t1") == expected_thread(PROMPT, tool_turns(1), ["1"])
    assert effects.all() == ["add:0"]
    run = await env.threads.get_run("r1")
    assert run.status == RunStatus.COMPLETED and run.usage.input_tokens == 14  # live only


async def test_a_lost_lease_abandons_the_model_call_at_once(env: Env) -> None:
    turns = tool_turns(1)
    paused = asyncio.Event()

    async def pause(turn: int, index: int) -> None:
        if index == 3:
            paused.set()
            await asyncio.Event().wait()  # a stream that would never end on its own

    effects = Effects()
    zombie = build_loop(
        env.threads,
        env.checkpoints,
        TurnAwareProvider(turns, pause=pause),
        adding_registry(effects),
        worker="zombie",
        clock=env.clock,
        renew_every=0.02,
    )
    zombie_task = asyncio.create_task(zombie.run("r1"))
    await paused.wait()
    # The zombie keeps renewing (it is alive, only stuck): time passes past each renewal's
    # lease until a claim lands between two renewals.
    for _ in range(100):
        env.clock.advance(LEASE + 1)
        try:
            await env.threads.claim_run("r1", worker="live", lease_seconds=LEASE)
            break
        except LeaseUnavailable:
            await asyncio.sleep(0)
    else:
        raise AssertionError("the takeover never got the lease")
    # The zombie's next renewal finds epoch 2: it stops streaming and reports itself fenced.
    async with asyncio.timeout(30):
        result = await zombie_task
    assert result.end == RunEnd.FENCED and "lease was lost" in result.detail
    run = await env.threads.get_run("r1")
    assert (run.lease.owner, run.lease.epoch, run.turn) == ("live", 2, 0)
    assert await env.threads.load_messages("t1") == [Message.user(PROMPT)]
