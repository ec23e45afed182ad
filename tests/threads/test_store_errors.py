"""The DynamoDB store raises its own errors, never botocore's: each AWS answer at the wire
(moto's own, or one a ``before-send`` hook returns) and the store error it becomes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiobotocore.config import AioConfig
from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import (
    DynamoThreadStore,
    RunState,
    StoreThrottled,
    StoreUnavailable,
    TableNotFound,
    ThreadStoreError,
    codec,
    dynamodb_client_config,
)
from tests.fixtures.aws import (
    DynamoEnv,
    aws_clients,
    dynamo_env,
)
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import OWNER, SETTINGS, seed_run
from tests.threads.faults import FaultInjector
from tests.threads.helpers import DIGEST, assistant_turn

LEASE = 30.0
BIG = "x" * 320_000
ERROR = ClassifiedError(code="abandoned", message="gone", retryable=False)

StoreCall = Callable[[DynamoThreadStore], Awaitable[object]]


@pytest.fixture(params=["moto-inprocess", "moto-server"])
def aws_url(request: pytest.FixtureRequest) -> str:
    if request.param == "moto-inprocess":
        return str(request.getfixturevalue("moto_inprocess_url"))
    return str(request.getfixturevalue("moto_server").endpoint_url)


async def _env(url: str, attempts: int) -> AsyncIterator[DynamoEnv]:
    # Few attempts: the faults below are answers botocore already retried as configured.
    retries = {"mode": "standard", "total_max_attempts": attempts}
    async with dynamo_env(
        url,
        config=dynamodb_client_config(total_max_attempts=attempts),
        s3_config=AioConfig(retries=retries),
    ) as opened:
        yield opened


@pytest.fixture
async def env(aws_url: str) -> AsyncIterator[DynamoEnv]:
    async for e in _env(aws_url, attempts=1):
        yield e


@pytest.fixture
async def db(aws_url: str) -> AsyncIterator[Any]:
    config = dynamodb_client_config(total_max_attempts=1)
    async with aws_clients(aws_url, config=config) as (client, _):
        yield client


def from_the_client(exc: BaseException) -> None:
    """The store's error carries the client's as its cause (for the logs), never is it."""
    assert isinstance(exc, ThreadStoreError)
    assert not isinstance(exc, ClientError | BotoCoreError)
    assert isinstance(exc.__cause__, ClientError | BotoCoreError)


# -- a missing table: every operation, moto's own ResourceNotFoundException

_RUN = RunState(run_id="r1", thread_id="t1", owner=OWNER, settings=SETTINGS)

EVERY_OPERATION: dict[str, StoreCall] = {
    "create_thread": lambda s: s.create_thread("t1", owner=OWNER),
    "get_thread": lambda s: s.get_thread("t1"),
    "load_messages": lambda s: s.load_messages("t1"),
    "create_run": lambda s: s.create_run("r1", thread_id="t1", owner=OWNER, settings=SETTINGS),
    "get_run": lambda s: s.get_run("r1"),
    "claim_run": lambda s: s.claim_run("r1", worker="w1", lease_seconds=LEASE),
    "renew_lease": lambda s: s.renew_lease("r1", worker="w1", epoch=1, lease_seconds=LEASE),
    "release_lease": lambda s: s.release_lease("r1", worker="w1", epoch=1),
    "finish_run": lambda s: s.finish_run("r1", worker="w1", epoch=1, status=_RUN.status),
    "cancel_run": lambda s: s.cancel_run("r1"),
    "commit_turn": lambda s: s.commit_turn(assistant_turn(_RUN, "hello")),
    "claim_tool_call": lambda s: s.claim_tool_call(
        "r1", "call-1", turn=0, name="add", input_digest=DIGEST, epoch=1
    ),
    "reclaim_tool_call": lambda s: s.reclaim_tool_call(
        "r1", "call-1", turn=0, epoch=2, previous_epoch=1
    ),
    "finish_tool_call": lambda s: s.finish_tool_call(
        "r1", "call-1", turn=0, epoch=1, content="3", is_error=False
    ),
    "get_tool_call": lambda s: s.get_tool_call("r1", "call-1", turn=0),
    "stalled_runs": lambda s: s.stalled_runs(now=1e12),
    "mark_rescued": lambda s: s.mark_rescued(_RUN, rescues=1, fruitless=0, now=1e12, next_in=1.0),
    "abandon_run": lambda s: s.abandon_run(_RUN, error=ERROR, now=1e12),
}


@pytest.mark.parametrize("operation", EVERY_OPERATION)
async def test_a_missing_table_is_table_not_found_naming_it(db: Any, operation: str) -> None:
    table = f"missing-{uuid.uuid4().hex[:8]}"
    store = DynamoThreadStore(table, client=db, clock=FakeClock())
    with pytest.raises(TableNotFound) as caught:
        await EVERY_OPERATION[operation](store)
    assert caught.value.table == table
    assert f"'{table}' does not exist" in str(caught.value)
    from_the_client(caught.value)
    assert isinstance(caught.value.__cause__, ClientError)
    assert caught.value.__cause__.response["Error"]["Code"] == "ResourceNotFoundException"


# -- injected answers, on one operation of each DynamoDB API the store calls

ONE_PER_API: dict[str, StoreCall] = {
    "GetItem": lambda s: s.get_run("r1"),
    "Query": lambda s: s.load_messages("t1"),
    "PutItem": lambda s: s.create_thread("t2", owner=OWNER),
    "UpdateItem": lambda s: s.renew_lease("r1", worker="w1", epoch=1, lease_seconds=LEASE),
    "TransactWriteItems": lambda s: s.claim_tool_call(
        "r1", "call-1", turn=0, name="add", input_digest=DIGEST, epoch=1
    ),
}

FAULTS = [
    ("throttle", StoreThrottled, "throttled"),
    ("500", StoreUnavailable, "InternalServerError"),
    ("unreachable", StoreUnavailable, "did not answer"),
    ("denied", ThreadStoreError, "AccessDeniedException"),
]


@pytest.mark.parametrize(("fault", "error", "says"), FAULTS)
@pytest.mark.parametrize("api", ONE_PER_API)
async def test_each_failure_becomes_its_store_error(
    env: DynamoEnv, api: str, fault: str, error: type[ThreadStoreError], says: str
) -> None:
    store = env.store()
    await seed_run(store)
    await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    injector = FaultInjector(env.db, api, [fault])
    with pytest.raises(ThreadStoreError) as caught:
        await ONE_PER_API[api](store)
    assert type(caught.value) is error
    assert says in str(caught.value) and env.target.table in str(caught.value)
    from_the_client(caught.value)
    assert injector.calls == 1


async def test_throttling_outlives_botocores_retries_before_it_is_reported(aws_url: str) -> None:
    async for env in _env(aws_url, attempts=2):
        store = env.store()
        await seed_run(store)
        injector = FaultInjector(env.db, "GetItem", ["throttle", "throttle"])
        with pytest.raises(StoreThrottled, match="after 1 retry; still throttled"):
            await store.get_run("r1")
        assert injector.calls == 2  # botocore retried first
        assert (await store.get_run("r1")).run_id == "r1"  # and the table is fine afterwards


@pytest.mark.parametrize(
    ("faults", "error"),
    [
        (["throttle"] * 3, StoreThrottled),
        (["cancel_throttled"] * 3, StoreThrottled),
        (["unreachable"] * 3, StoreUnavailable),
        (["500"] * 3, StoreUnavailable),
    ],
)
async def test_a_commit_reports_the_failure_once_the_stores_own_retries_are_spent(
    env: DynamoEnv, faults: list[str], error: type[ThreadStoreError]
) -> None:
    async def sleep(seconds: float) -> None:
        return None

    store = env.store(sleep=sleep, transient_retries=2)
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    injector = FaultInjector(env.db, "TransactWriteItems", faults)
    with pytest.raises(ThreadStoreError) as caught:
        await store.commit_turn(assistant_turn(run, "hello"))
    assert type(caught.value) is error
    from_the_client(caught.value)
    assert injector.calls == 3 and injector.reached_server == 0
    assert await store.load_messages("t1") == [Message.user("hi")]


async def test_a_throttled_create_run_is_throttling_not_a_thread_that_moved_on(
    env: DynamoEnv,
) -> None:
    store = env.store()
    await store.create_thread("t1", owner=OWNER)
    FaultInjector(env.db, "TransactWriteItems", ["cancel_throttled"])
    with pytest.raises(StoreThrottled, match="ThrottlingError"):
        await store.create_run("r1", thread_id="t1", owner=OWNER, settings=SETTINGS)
    # Nothing was written: the same request goes through once the table calms down.
    run = await store.create_run("r1", thread_id="t1", owner=OWNER, settings=SETTINGS)
    assert run.run_id == "r1"


async def test_a_throttled_tool_claim_is_throttling_not_a_lost_lease(env: DynamoEnv) -> None:
    # Throttled past the store's own retry of transient cancellations.
    store = env.store(transient_retries=1)
    await seed_run(store)
    await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    FaultInjector(env.db, "TransactWriteItems", ["cancel_throttled"] * 2)
    with pytest.raises(StoreThrottled):
        await store.claim_tool_call(
            "r1", "call-1", turn=0, name="add", input_digest=DIGEST, epoch=1
        )
    assert await store.get_tool_call("r1", "call-1", turn=0) is None


# -- the S3 offload of big messages


async def test_an_offload_to_a_missing_bucket_names_it_and_writes_nothing(env: DynamoEnv) -> None:
    bucket = f"missing-{uuid.uuid4().hex[:8]}"
    store = DynamoThreadStore(
        env.target.table, client=env.db, s3_client=env.s3, bucket=bucket, clock=env.clock
    )
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    with pytest.raises(ThreadStoreError, match=f"s3://{bucket}/messages/t1/") as caught:
        await store.commit_turn(assistant_turn(run, BIG))
    assert "NoSuchBucket" in str(caught.value)
    from_the_client(caught.value)
    assert await store.load_messages("t1") == [Message.user("hi")]


async def test_a_missing_offloaded_body_names_its_key(env: DynamoEnv) -> None:
    store = env.store()
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    await store.commit_turn(assistant_turn(run, BIG))
    page = await env.db.get_item(
        TableName=env.target.table, Key=codec.to_wire(codec.message_key("t1", 1))
    )
    key = codec.message_body_ref(page["Item"])
    assert key is not None
    await env.s3.delete_object(Bucket=env.target.bucket, Key=key)
    with pytest.raises(ThreadStoreError, match=f"s3://{env.target.bucket}/{key}") as caught:
        await store.load_messages("t1")
    assert "NoSuchKey" in str(caught.value)
    from_the_client(caught.value)


@pytest.mark.parametrize(
    ("operation", "fault", "error"),
    [
        ("PutObject", "slowdown", StoreThrottled),
        ("PutObject", "500", StoreUnavailable),
        ("GetObject", "unreachable", StoreUnavailable),
    ],
)
async def test_offload_failures_become_store_errors(
    env: DynamoEnv, operation: str, fault: str, error: type[ThreadStoreError]
) -> None:
    store = env.store()
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    FaultInjector(env.s3, operation, [fault], service="s3")
    with pytest.raises(ThreadStoreError) as caught:
        result = await store.commit_turn(assistant_turn(run, BIG))
        await store.commit_turn(assistant_turn(result.run, "small"))
        await store.load_messages("t1")
    assert type(caught.value) is error
    assert f"s3://{env.target.bucket}/messages/t1/" in str(caught.value)
    from_the_client(caught.value)
