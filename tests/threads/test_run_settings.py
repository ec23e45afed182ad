"""A run's settings come back whole from every operation, on every backend, while DynamoDB
keeps a long system prompt out of the run item that every claim, renewal and commit
rewrites (each of those writes bills the item's size)."""

from __future__ import annotations

from typing import Any

import pytest

from awaken_s3.messages import Message
from awaken_s3.threads import DynamoThreadStore, RunSettings, RunStatus, ThreadStore, codec
from awaken_s3.threads.errors import LeaseUnavailable
from awaken_s3.threads.prompts import SYSTEM_PROMPTS, SystemPrompts
from tests.fixtures.aws import aws_clients, dynamo_store, fresh_target
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import OWNER, seed_run
from tests.threads.helpers import assistant_turn

LONG = RunSettings(
    model="scripted-1",
    system="You answer questions about shipping orders. " * 60,
    max_tokens=256,
    tools=("add",),
)


async def test_a_long_system_prompt_comes_back_from_every_operation(store: ThreadStore) -> None:
    created = await seed_run(store, settings=LONG)
    assert created.settings == LONG
    assert (await store.get_run("r1")).settings == LONG
    claimed = await store.claim_run("r1", worker="w1", lease_seconds=60)
    assert claimed.settings == LONG
    epoch = claimed.lease.epoch
    renewed = await store.renew_lease("r1", worker="w1", epoch=epoch, lease_seconds=60)
    assert renewed.settings == LONG
    committed = await store.commit_turn(assistant_turn(renewed, "hello"))
    assert committed.run.settings == LONG
    with pytest.raises(LeaseUnavailable):
        await store.claim_run("r1", worker="w2", lease_seconds=60)
    released = await store.release_lease("r1", worker="w1", epoch=epoch)
    assert released.settings == LONG
    again = await store.claim_run("r1", worker="w2", lease_seconds=60)
    finished = await store.finish_run(
        "r1", worker="w2", epoch=again.lease.epoch, status=RunStatus.COMPLETED
    )
    assert finished.settings == LONG
    assert (await store.cancel_run("r1")).settings == LONG
    # A retried create with the same request is answered with the same run.
    retry = await store.create_run(
        "r1", thread_id="t1", owner=OWNER, settings=LONG, messages=[Message.user("hi")]
    )
    assert retry.settings == LONG


async def test_an_unknown_thread_has_no_messages(store: ThreadStore) -> None:
    assert await store.load_messages("nobody") == []


@pytest.fixture
async def dynamo(moto_server: Any, clock: FakeClock) -> Any:
    url = moto_server.endpoint_url
    async with aws_clients(url) as (db, s3):
        target = await fresh_target(db, s3, url)
        yield dynamo_store(db, s3, target, clock=clock), db, target.table


async def raw_run_item(db: Any, table: str, run_id: str) -> dict[str, Any]:
    answer = await db.get_item(
        TableName=table, Key=codec.to_wire(codec.run_key(run_id)), ConsistentRead=True
    )
    item: dict[str, Any] = answer["Item"]
    return item


async def test_dynamodb_keeps_a_long_prompt_out_of_the_run_item(dynamo: Any) -> None:
    store, db, table = dynamo
    await seed_run(store, settings=LONG)
    item = await raw_run_item(db, table, "r1")
    assert LONG.system is not None and LONG.system not in str(item)
    # The run item stays within one write unit whatever the prompt's length.
    assert len(str(item)) < 1024
    settings = await db.get_item(TableName=table, Key=codec.to_wire(codec.settings_key("r1")))
    assert codec.system_of(codec.from_wire(settings["Item"])) == LONG.system
    # Another process (no cached prompt) reads the settings item, once.
    SYSTEM_PROMPTS.clear()
    reads: list[str] = []

    def count(**kwargs: Any) -> None:
        reads.append(str(kwargs["event_name"]))

    db.meta.events.register("before-send.dynamodb.GetItem", count)
    try:
        fresh = DynamoThreadStore(table, client=db)
        assert (await fresh.get_run("r1")).settings == LONG
        assert (await fresh.get_run("r1")).settings == LONG
    finally:
        db.meta.events.unregister("before-send.dynamodb.GetItem", count)
    assert len(reads) == 3  # the run item twice, its settings item once


async def test_a_short_prompt_stays_inline(dynamo: Any) -> None:
    store, db, table = dynamo
    await seed_run(store, settings=RunSettings(model="m", system="be brief"))
    item = await raw_run_item(db, table, "r1")
    assert "be brief" in str(item)
    missing = await db.get_item(TableName=table, Key=codec.to_wire(codec.settings_key("r1")))
    assert "Item" not in missing


def test_the_prompt_cache_is_bounded_by_bytes() -> None:
    cache = SystemPrompts(max_bytes=10)
    cache.put(("t", "a"), "12345")
    cache.put(("t", "b"), "12345")
    cache.put(("t", "c"), "123")
    assert cache.get(("t", "a")) is None
    assert (cache.get(("t", "b")), cache.get(("t", "c"))) == ("12345", "123")
    cache.put(("t", "huge"), "x" * 11)
    assert cache.get(("t", "huge")) is None
