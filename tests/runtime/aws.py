"""A run on DynamoDB + S3 (moto server), and how to read back what happened."""

from __future__ import annotations

from collections import Counter
from typing import Any

from awaken_s3.messages import Message, ToolResultBlock
from awaken_s3.runtime.tools import OUTCOME_UNKNOWN
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.threads import RunState
from tests.fixtures.aws import AwsTarget, aws_clients, dynamo_store, fresh_target
from tests.fixtures.runs import seed_run
from tests.runtime.scripts import expected_thread, tool_turns

PROMPT = "add things up"


async def seeded_target(endpoint: str, run_id: str = "r1") -> AwsTarget:
    async with aws_clients(endpoint) as (db, s3):
        target = await fresh_target(db, s3, endpoint)
        await seed_run(dynamo_store(db, s3, target), run_id, prompt=PROMPT)
        return target


async def final_state(target: AwsTarget, run_id: str = "r1") -> tuple[RunState, list[Message], Any]:
    async with aws_clients(target.endpoint_url) as (db, s3):
        store = dynamo_store(db, s3, target)
        checkpoint = await S3StreamCheckpointStore(target.bucket, client=s3).get(run_id)
        return await store.get_run(run_id), await store.load_messages("t1"), checkpoint


def check_thread(messages: list[Message], effects: list[str], turns: int) -> Counter[str]:
    """Every turn committed exactly once, in order; every tool ran at most once, and exactly
    once unless its result says the outcome is unknown. Returns the side-effect counts."""
    counts = Counter(effects)
    results = []
    for t in range(turns):
        block = messages[2 + 2 * t].content[0]
        assert isinstance(block, ToolResultBlock)
        results.append(block.content)
        if block.content == OUTCOME_UNKNOWN:
            assert counts[f"add:{t}"] <= 1
        else:
            assert counts[f"add:{t}"] == 1, (t, counts)
    expected = expected_thread(PROMPT, tool_turns(turns), results)
    for got, want in zip(messages, expected, strict=True):
        assert got == want, (got, want)
    assert all(r == OUTCOME_UNKNOWN or r == str(t + 1) for t, r in enumerate(results))
    return counts
