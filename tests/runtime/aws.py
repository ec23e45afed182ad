"""A run on DynamoDB + S3 (moto server), and how to read back what happened."""

from __future__ import annotations

from collections import Counter
from typing import Any

from awaken_s3.messages import Message, ToolResultBlock
from awaken_s3.runtime.tools import OUTCOME_UNKNOWN
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.threads import DynamoThreadStore, RunState
from tests.runtime.conftest import SETTINGS
from tests.runtime.scripts import expected_thread, tool_turns
from tests.threads.backends import AwsTarget, aws_clients, fresh_target

PROMPT = "add things up"


async def seeded_target(endpoint: str, run_id: str = "r1") -> AwsTarget:
    async with aws_clients(endpoint) as (db, s3):
        target = await fresh_target(db, s3, endpoint)
        store = DynamoThreadStore(target.table, client=db, s3_client=s3, bucket=target.bucket)
        await store.create_thread("t1", owner="alice")
        await store.create_run(
            run_id,
            thread_id="t1",
            owner="alice",
            settings=SETTINGS,
            messages=[Message.user(PROMPT)],
        )
        return target


async def final_state(target: AwsTarget, run_id: str = "r1") -> tuple[RunState, list[Message], Any]:
    async with aws_clients(target.endpoint_url) as (db, s3):
        store = DynamoThreadStore(target.table, client=db, s3_client=s3, bucket=target.bucket)
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
