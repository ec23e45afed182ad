"""A whole run on DynamoDB while writes keep losing their responses after landing."""

from __future__ import annotations

from collections import Counter

import pytest

from awaken_s3.local.moto import MotoServer
from awaken_s3.runtime.loop import RunEnd
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.streaming.outcome import Usage
from awaken_s3.threads import RunStatus
from tests.fixtures.aws import aws_clients, dynamo_store, fresh_target
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import seed_run
from tests.runtime.conftest import build_loop
from tests.runtime.scripts import (
    Effects,
    TurnAwareProvider,
    adding_registry,
    expected_thread,
    tool_turns,
)
from tests.threads.faults import LostResponses

PROMPT = "add things up"
TURNS = 3


@pytest.mark.parametrize("every", [2, 3])
async def test_lost_write_responses_never_duplicate_or_lose_anything(
    moto_server: MotoServer, every: int
) -> None:
    url = moto_server.endpoint_url
    async with aws_clients(url) as (db, s3):
        target = await fresh_target(db, s3, url)
        clock = FakeClock()
        threads = dynamo_store(db, s3, target, clock=clock)
        await seed_run(threads, prompt=PROMPT)
        chaos = LostResponses(db, every)
        effects = Effects()
        checkpoints = S3StreamCheckpointStore(target.bucket, client=s3)
        loop = build_loop(
            threads,
            checkpoints,
            TurnAwareProvider(tool_turns(TURNS)),
            adding_registry(effects),
            worker="w1",
            clock=clock,
        )
        result = await loop.run("r1")
        assert result.end == RunEnd.COMPLETED, result.detail
        assert chaos.lost["TransactWriteItems"] >= TURNS  # commits and tool claims
        assert await threads.load_messages("t1") == expected_thread(
            PROMPT, tool_turns(TURNS), [str(t + 1) for t in range(TURNS)]
        )
        assert Counter(effects.all()) == Counter({f"add:{t}": 1 for t in range(TURNS)})
        run = await threads.get_run("r1")
        assert run.status == RunStatus.COMPLETED and run.turn == TURNS + 1
        assert run.usage.input_tokens == Usage(7, 0).input_tokens * (TURNS + 1)
        assert await checkpoints.get("r1") is None


async def test_lease_writes_whose_responses_were_lost_still_suspend_and_fail_cleanly(
    moto_server: MotoServer,
) -> None:
    url = moto_server.endpoint_url
    async with aws_clients(url) as (db, s3):
        target = await fresh_target(db, s3, url)
        clock = FakeClock()
        threads = dynamo_store(db, s3, target, clock=clock)
        await seed_run(threads, prompt=PROMPT)
        # Every claim, release and finish loses its first response (its retry gets through).
        chaos = LostResponses(db, 2, operations=("UpdateItem",))
        checkpoints = S3StreamCheckpointStore(target.bucket, client=s3)
        mono = FakeClock(1000.0)

        async def pause(turn: int, index: int) -> None:
            if turn == 1 and index == 2:
                mono.advance(60)

        loop = build_loop(
            threads,
            checkpoints,
            TurnAwareProvider(tool_turns(TURNS), pause=pause),
            adding_registry(Effects()),
            worker="w1",
            clock=clock,
            monotonic=mono,
        )
        suspended = await loop.run("r1", deadline=mono.now + 30)
        assert suspended.end == RunEnd.SUSPENDED and suspended.should_continue
        run = await threads.get_run("r1")
        assert (run.status, run.lease.owner) == (RunStatus.SUSPENDED, None)

        from awaken_s3.streaming.errors import ContextOverflow
        from awaken_s3.streaming.scripted import Fail, ScriptedProvider

        failing = build_loop(
            threads,
            checkpoints,
            ScriptedProvider([[Fail(ContextOverflow("too long"))]]),
            adding_registry(Effects()),
            worker="w2",
            clock=clock,
        )
        failed = await failing.run("r1")
        assert failed.end == RunEnd.FAILED
        run = await threads.get_run("r1")
        assert run.status == RunStatus.FAILED and run.error is not None
        assert run.error.code == "context_overflow"
        assert chaos.lost["UpdateItem"] >= 4  # two claims, the release, the finish
