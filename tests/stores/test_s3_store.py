"""S3-only behaviour: failures, object layout, SSE-KMS, client ownership."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import aioboto3
import pytest
from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.errors import (
    CheckpointCorrupt,
    CheckpointFenced,
    CheckpointTooLarge,
    StreamCheckpointError,
)
from awaken_s3.local.ports import free_port
from awaken_s3.models import encode_checkpoint
from awaken_s3.stores import s3_protocol as proto
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from tests.fixtures.aws import fresh_name, s3_client, threaded_moto
from tests.stores.conftest import Backend, make_checkpoint
from tests.stores.faults import install


@pytest.fixture
async def moto_client(moto_inprocess_url: str) -> AsyncIterator[Any]:
    # One attempt per request, so injected 5xx reach the store instead of
    # being retried by botocore.
    async with s3_client(moto_inprocess_url, total_attempts=1) as client:
        yield client


@pytest.fixture
async def bucket(moto_client: Any) -> str:
    name = fresh_name("b")
    await moto_client.create_bucket(Bucket=name)
    return name


async def test_outage_surfaces_as_store_error_with_the_cause_attached() -> None:
    # Nothing listens on this port: every request fails to connect.
    dead = f"http://127.0.0.1:{free_port()}"
    async with s3_client(dead, total_attempts=1) as client:
        store = S3StreamCheckpointStore("bucket", client=client)
        calls = [
            store.get("run-1"),
            store.put(make_checkpoint(), expected_version=None),
            store.put(make_checkpoint(), expected_version='"etag"'),
            store.delete("run-1"),
            store.delete("run-1", expected_version='"etag"'),
        ]
        for call in calls:
            with pytest.raises(StreamCheckpointError) as caught:
                await call
            assert type(caught.value) is StreamCheckpointError
            assert isinstance(caught.value.__cause__, BotoCoreError)
            assert caught.value.run_id == "run-1"


async def test_a_server_that_goes_away_mid_run_surfaces_as_store_error() -> None:
    # Unlike a closed port, the client here has live pooled connections when
    # the server stops.
    with threaded_moto() as server:
        async with s3_client(server.endpoint_url, total_attempts=1) as client:
            await client.create_bucket(Bucket="outage")
            store = S3StreamCheckpointStore("outage", client=client)
            version = await store.put(make_checkpoint(), expected_version=None)
            server.stop()
            with pytest.raises(StreamCheckpointError) as caught:
                await store.put(make_checkpoint(partial_text="more"), expected_version=version)
            assert type(caught.value) is StreamCheckpointError
            assert isinstance(caught.value.__cause__, BotoCoreError), repr(caught.value.__cause__)
            with pytest.raises(StreamCheckpointError):
                await store.get("run-1")


@pytest.mark.parametrize(
    ("status", "code"),
    [(500, "InternalError"), (503, "SlowDown"), (403, "AccessDenied"), (400, "InvalidRequest")],
)
async def test_server_errors_surface_as_store_errors_never_as_fences(
    moto_client: Any, bucket: str, status: int, code: str
) -> None:
    store = S3StreamCheckpointStore(bucket, client=moto_client)
    version = await store.put(make_checkpoint(), expected_version=None)
    injector = install(moto_client)
    injector.arm(status, code, count=100, operations=set())
    calls = [
        store.get("run-1"),
        store.put(make_checkpoint(partial_text="x"), expected_version=version),
        store.delete("run-1", expected_version=version),
    ]
    for call in calls:
        with pytest.raises(StreamCheckpointError, match=code) as caught:
            await call
        assert type(caught.value) is StreamCheckpointError
        assert isinstance(caught.value.__cause__, ClientError)
    injector.arm(0, "", count=0, operations=set())
    stored = await store.get("run-1")
    assert stored is not None and stored.version == version


async def test_missing_bucket_is_an_error_not_an_absent_checkpoint(s3_backend: Backend) -> None:
    store = S3StreamCheckpointStore(fresh_name("missing"), client=s3_backend.client)
    for call in (store.get("run-1"), store.put(make_checkpoint(), expected_version=None)):
        with pytest.raises(StreamCheckpointError, match="NoSuchBucket") as caught:
            await call
        assert not isinstance(caught.value, CheckpointFenced)
    # A replace into a missing bucket: AWS/moto say NoSuchBucket, SeaweedFS
    # checks If-Match first and says 412, which reads as fenced. Either way the
    # writer gets a store error; the first get or create names the real cause.
    with pytest.raises(StreamCheckpointError):
        await store.put(make_checkpoint(), expected_version='"e"')


async def test_object_layout_key_and_content_type(moto_client: Any, bucket: str) -> None:
    store = S3StreamCheckpointStore(bucket, prefix="ckpt/v1/", client=moto_client)
    checkpoint = make_checkpoint("run-42")
    version = await store.put(checkpoint, expected_version=None)
    key = f"ckpt/v1/{hashlib.sha256(b'run-42').hexdigest()[:2]}/run-42.json"
    head = await moto_client.head_object(Bucket=bucket, Key=key)
    assert head["ContentType"] == "application/json"
    assert head["ETag"] == version
    obj = await moto_client.get_object(Bucket=bucket, Key=key)
    assert await obj["Body"].read() == encode_checkpoint(checkpoint)


async def test_default_prefix_is_checkpoints(moto_client: Any, bucket: str) -> None:
    store = S3StreamCheckpointStore(bucket, client=moto_client)
    await store.put(make_checkpoint("run-9"), expected_version=None)
    listing = await moto_client.list_objects_v2(Bucket=bucket)
    assert [item["Key"] for item in listing["Contents"]] == [
        f"checkpoints/{hashlib.sha256(b'run-9').hexdigest()[:2]}/run-9.json"
    ]


async def test_sse_kms_key_is_applied_to_every_write(moto_client: Any, bucket: str) -> None:
    store = S3StreamCheckpointStore(bucket, client=moto_client, kms_key_id="alias/checkpoints")
    version = await store.put(make_checkpoint(), expected_version=None)
    await store.put(make_checkpoint(partial_text="more"), expected_version=version)
    head = await moto_client.head_object(Bucket=bucket, Key=store.key_for("run-1"))
    assert head["ServerSideEncryption"] == "aws:kms"
    assert head["SSEKMSKeyId"] == "alias/checkpoints"


async def test_without_kms_no_sse_kms_is_requested(moto_client: Any, bucket: str) -> None:
    store = S3StreamCheckpointStore(bucket, client=moto_client)
    await store.put(make_checkpoint(), expected_version=None)
    head = await moto_client.head_object(Bucket=bucket, Key=store.key_for("run-1"))
    assert head.get("ServerSideEncryption") != "aws:kms"


async def test_oversized_checkpoint_is_refused_before_any_request(
    moto_client: Any, bucket: str
) -> None:
    store = S3StreamCheckpointStore(bucket, client=moto_client, max_bytes=1024)
    injector = install(moto_client)
    with pytest.raises(CheckpointTooLarge):
        await store.put(make_checkpoint(partial_text="x" * 2000), expected_version=None)
    assert injector.seen == []


async def test_oversized_stored_object_is_corrupt(moto_client: Any, bucket: str) -> None:
    store = S3StreamCheckpointStore(bucket, client=moto_client, max_bytes=1024)
    body = encode_checkpoint(make_checkpoint(partial_text="x" * 2000))
    await moto_client.put_object(Bucket=bucket, Key=store.key_for("run-1"), Body=body)
    with pytest.raises(CheckpointCorrupt, match="limit"):
        await store.get("run-1")


async def test_fenced_error_names_the_run(moto_client: Any, bucket: str) -> None:
    store = S3StreamCheckpointStore(bucket, client=moto_client)
    await store.put(make_checkpoint("run-5"), expected_version=None)
    with pytest.raises(CheckpointFenced, match="run-5") as caught:
        await store.put(make_checkpoint("run-5"), expected_version=None)
    assert caught.value.run_id == "run-5"
    assert isinstance(caught.value.__cause__, ClientError)


async def test_store_owning_its_client_uses_aws_endpoint_url_and_closes_it(
    moto_inprocess_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No endpoint setting of our own: botocore's AWS_ENDPOINT_URL routes the
    # client the store creates from a session.
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_inprocess_url)
    bucket = fresh_name("b")
    async with aioboto3.Session().client("s3") as admin:
        await admin.create_bucket(Bucket=bucket)
    async with S3StreamCheckpointStore(bucket, session=aioboto3.Session()) as store:
        version = await store.put(make_checkpoint(), expected_version=None)
        stored = await store.get("run-1")
        assert stored is not None and stored.version == version
    with pytest.raises(StreamCheckpointError, match="closed"):
        await store.get("run-1")


async def test_store_creates_its_client_lazily_without_async_with(
    moto_inprocess_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_inprocess_url)
    bucket = fresh_name("b")
    async with aioboto3.Session().client("s3") as admin:
        await admin.create_bucket(Bucket=bucket)
    store = S3StreamCheckpointStore(bucket)
    try:
        await store.put(make_checkpoint(), expected_version=None)
        assert await store.get("run-1") is not None
    finally:
        await store.aclose()
    await store.close()  # idempotent
    with pytest.raises(StreamCheckpointError, match="closed"):
        await store.put(make_checkpoint(), expected_version=None)


async def test_a_client_passed_in_stays_open_after_the_store_closes(
    moto_client: Any, bucket: str
) -> None:
    async with S3StreamCheckpointStore(bucket, client=moto_client) as store:
        await store.put(make_checkpoint(), expected_version=None)
    listing = await moto_client.list_objects_v2(Bucket=bucket)
    assert listing["KeyCount"] == 1


def test_constructor_refuses_ambiguous_or_nonsense_settings() -> None:
    sentinel: Any = object()
    with pytest.raises(ValueError):
        S3StreamCheckpointStore("b", client=sentinel, session=aioboto3.Session())
    with pytest.raises(ValueError):
        S3StreamCheckpointStore("")
    with pytest.raises(ValueError):
        S3StreamCheckpointStore("b", conflict_retries=-1)


@pytest.mark.parametrize("concurrency", [1, 16])
async def test_a_listing_past_one_page_names_every_run_once(
    moto_client: Any, bucket: str, concurrency: int
) -> None:
    # Past the first flat pages (4 of 1,000 keys; of 7 here) the rest comes page by page
    # (concurrency 1) or shard by shard, and no run is named twice.
    store = S3StreamCheckpointStore(
        bucket, client=moto_client, list_concurrency=concurrency, list_page_size=7
    )
    run_ids = [f"run-{n:04d}" for n in range(60)]

    async def plant(index: int, run_id: str) -> None:
        flat = index % 10 == 0  # some in the layout of the build before the shards
        key = proto.legacy_key(store.prefix, run_id) if flat else store.key_for(run_id)
        await moto_client.put_object(Bucket=bucket, Key=key, Body=b"{}")

    await asyncio.gather(*(plant(i, r) for i, r in enumerate(run_ids)))
    listed = [run_id async for run_id in store.list_run_ids()]
    assert len(listed) == len(run_ids) and set(listed) == set(run_ids)
