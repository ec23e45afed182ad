"""DynamoDB-specific behaviour: S3 offload of big messages, and injected transient faults."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from awaken_s3.local.moto import MotoServer
from awaken_s3.messages import Message
from awaken_s3.threads import (
    CommitFenced,
    DynamoThreadStore,
    MessageTooLarge,
    ThreadStoreError,
    codec,
    dynamodb_client_config,
)
from tests.fixtures.aws import (
    DynamoEnv,
    dynamo_env,
)
from tests.fixtures.runs import seed_run
from tests.threads.faults import FaultInjector
from tests.threads.helpers import DIGEST, assistant_turn

LEASE = 30.0
BIG = "x" * 320_000


async def message_items(env: DynamoEnv) -> list[dict[str, Any]]:
    page = await env.db.query(
        TableName=env.target.table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :m)",
        ExpressionAttributeValues={":pk": {"S": "THREAD#t1"}, ":m": {"S": "MSG#"}},
    )
    return list(page["Items"])


async def offloaded_keys(env: DynamoEnv) -> list[str]:
    listing = await env.s3.list_objects_v2(Bucket=env.target.bucket, Prefix="messages/")
    return sorted(o["Key"] for o in listing.get("Contents", []))


@pytest.fixture
async def env(moto_server: MotoServer) -> AsyncIterator[DynamoEnv]:
    async with dynamo_env(moto_server.endpoint_url) as opened:
        yield opened


@pytest.fixture
async def env_no_retries(moto_server: MotoServer) -> AsyncIterator[DynamoEnv]:
    config = dynamodb_client_config(total_max_attempts=1)
    async with dynamo_env(moto_server.endpoint_url, config=config) as opened:
        yield opened


async def test_big_message_is_offloaded_to_s3_and_read_back(env: DynamoEnv) -> None:
    store = env.store()
    run = await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    run = (await store.commit_turn(assistant_turn(run, BIG))).run
    await store.commit_turn(assistant_turn(run, "small"))
    items = await message_items(env)
    refs = [codec.message_body_ref(i) for i in items]
    keys = await offloaded_keys(env)
    assert refs[0] is None and refs[2] is None and "body" in items[2]
    assert refs[1] is not None and keys == [refs[1]]
    assert keys[0].startswith("messages/t1/0000000001-")
    assert "body" not in items[1]
    messages = await store.load_messages("t1")
    assert [m.text for m in messages] == ["hi", BIG, "small"]
    # A fresh store object (another process) reads it back the same way.
    assert await env.store().load_messages("t1") == messages


async def test_big_message_without_a_bucket_is_refused_before_any_write(env: DynamoEnv) -> None:
    store = DynamoThreadStore(env.target.table, client=env.db, clock=env.clock)
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    with pytest.raises(MessageTooLarge):
        await store.commit_turn(assistant_turn(run, BIG))
    assert await store.load_messages("t1") == [Message.user("hi")]
    assert (await store.get_run("r1")).turn == 0


async def test_a_lost_commit_leaves_an_orphan_body_never_a_dangling_reference(
    env: DynamoEnv,
) -> None:
    store = env.store()
    await seed_run(store)
    zombie = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    env.clock.advance(LEASE + 1)
    await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    with pytest.raises(CommitFenced):
        await store.commit_turn(assistant_turn(zombie, BIG))
    assert len(await offloaded_keys(env)) == 1  # written first, under a unique key
    assert all(codec.message_body_ref(i) is None for i in await message_items(env))
    assert await store.load_messages("t1") == [Message.user("hi")]


@pytest.mark.parametrize("faults", [["throttle", "throttle"], ["500"], ["throttling", "500"]])
async def test_throttling_and_5xx_are_retried_by_botocore(
    env: DynamoEnv, faults: list[str]
) -> None:
    store = env.store()
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    injector = FaultInjector(env.db, "TransactWriteItems", faults)
    result = await store.commit_turn(assistant_turn(run, "hello"))
    assert not result.duplicate and injector.calls == len(faults) + 1
    assert [m.text for m in await store.load_messages("t1")] == ["hi", "hello"]


async def test_a_commit_whose_response_was_lost_is_recognised_not_repeated(env: DynamoEnv) -> None:
    store = env.store()
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    injector = FaultInjector(env.db, "TransactWriteItems", ["lost_response"])
    result = await store.commit_turn(assistant_turn(run, "hello"))
    # botocore retried the transaction; its conditions failed because the first attempt
    # had landed, and the store recognised its own commit id.
    assert injector.reached_server == 2
    assert result.duplicate
    assert (result.run.turn, result.run.message_count) == (1, 2)
    assert [m.text for m in await store.load_messages("t1")] == ["hi", "hello"]
    assert len(await message_items(env)) == 2


async def test_lost_response_after_botocore_gives_up_is_retried_by_the_store(
    env_no_retries: DynamoEnv,
) -> None:
    env = env_no_retries
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    store = env.store(sleep=sleep)
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    injector = FaultInjector(env.db, "TransactWriteItems", ["lost_response", "conflict", "500"])
    result = await store.commit_turn(assistant_turn(run, "hello"))
    assert result.duplicate and injector.calls == 4 and len(slept) == 3
    assert [m.text for m in await store.load_messages("t1")] == ["hi", "hello"]
    assert (await store.get_run("r1")).usage.input_tokens == 10  # usage counted once


async def test_transient_failures_beyond_the_budget_surface_as_errors(
    env_no_retries: DynamoEnv,
) -> None:
    env = env_no_retries

    async def sleep(seconds: float) -> None:
        return None

    store = env.store(sleep=sleep, transient_retries=2)
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    FaultInjector(env.db, "TransactWriteItems", ["conflict"] * 3)
    with pytest.raises(ThreadStoreError, match="TransactionConflict"):
        await store.commit_turn(assistant_turn(run, "hello"))
    assert await store.load_messages("t1") == [Message.user("hi")]
    # Nothing landed, so the same commit can be made once the table calms down.
    assert not (await store.commit_turn(assistant_turn(run, "hello"))).duplicate


async def test_a_tool_claim_cancelled_for_a_transaction_conflict_is_sent_again(
    env_no_retries: DynamoEnv,
) -> None:
    # The calls of one turn are claimed at once, each transaction checking the run item: one
    # may be cancelled for TransactionConflict, and is sent again (claims are idempotent).
    env = env_no_retries
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    store = env.store(sleep=sleep, transient_retries=3)
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    injector = FaultInjector(env.db, "TransactWriteItems", ["conflict", "conflict"])
    record, fresh = await store.claim_tool_call(
        "r1", "c1", turn=0, name="add", input_digest=DIGEST, epoch=run.lease.epoch
    )
    assert fresh and record.status.value == "claimed"
    assert injector.calls == 3 and len(slept) == 2
    # Past the store's budget the conflict surfaces as the store's own error.
    FaultInjector(env.db, "TransactWriteItems", ["conflict"] * 4)
    with pytest.raises(ThreadStoreError, match="TransactionConflict"):
        await store.claim_tool_call(
            "r1", "c2", turn=0, name="add", input_digest=DIGEST, epoch=run.lease.epoch
        )
    assert await store.get_tool_call("r1", "c2", turn=0) is None
