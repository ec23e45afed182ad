"""Upgrading to the sharded key layout with runs in flight (S3 backends: moto and SeaweedFS).

A stack deployed before the layout keeps its checkpoints at ``<prefix><run_id>.json``; the
sharded build must read them, keep fencing an older build's writer of the same run, delete
them with their runs, and list them beside the sharded ones. The "older build" here is a raw
client writing the legacy key with the conditions that build sends.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from awaken_s3.errors import CheckpointCorrupt, CheckpointFenced
from awaken_s3.models import encode_checkpoint
from awaken_s3.stores import s3_protocol as proto
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from tests.stores.conftest import Backend, make_checkpoint


def _store(backend: Backend) -> S3StreamCheckpointStore:
    assert isinstance(backend.store, S3StreamCheckpointStore)
    return backend.store


async def _old_build_put(backend: Backend, run_id: str, body: bytes, **condition: str) -> str:
    """A write the build before the sharded layout would send: the flat key, conditional."""
    store = _store(backend)
    answer = await backend.client.put_object(
        Bucket=store.bucket, Key=proto.legacy_key(store.prefix, run_id), Body=body, **condition
    )
    return str(answer["ETag"])


async def _exists(backend: Backend, key: str) -> bool:
    store = _store(backend)
    try:
        await backend.client.head_object(Bucket=store.bucket, Key=key)
    except ClientError:
        return False
    return True


async def test_a_legacy_checkpoint_is_read_and_written_where_it_is(s3_backend: Backend) -> None:
    store = _store(s3_backend)
    old = make_checkpoint(partial_text="before the upgrade")
    await _old_build_put(s3_backend, "run-1", encode_checkpoint(old), IfNoneMatch="*")
    stored = await store.get("run-1")
    assert stored is not None and stored.checkpoint == old
    assert store.key_at("run-1", stored.version) == proto.legacy_key(store.prefix, "run-1")
    newer = make_checkpoint(partial_text="before the upgrade, and after", epoch=2)
    version = await store.put(newer, expected_version=stored.version)
    again = await store.get("run-1")
    assert again is not None and (again.checkpoint, again.version) == (newer, version)
    # The turn stays on its one chain of conditional writes: nothing at the sharded key yet.
    assert not await _exists(s3_backend, store.key_for("run-1"))


async def test_an_older_builds_writer_is_fenced_by_the_newer_builds_write(
    s3_backend: Backend,
) -> None:
    store = _store(s3_backend)
    etag = await _old_build_put(
        s3_backend, "run-1", encode_checkpoint(make_checkpoint()), IfNoneMatch="*"
    )
    stored = await store.get("run-1")
    assert stored is not None
    taken = await store.put(make_checkpoint(epoch=2), expected_version=stored.version)
    with pytest.raises(ClientError):  # 412: the older build sees a lost condition
        await _old_build_put(s3_backend, "run-1", b"zombie", IfMatch=etag)
    # And once the newer build ended the turn, its next condition still loses.
    await store.delete("run-1", expected_version=taken)
    with pytest.raises(ClientError):
        await _old_build_put(s3_backend, "run-1", b"zombie", IfMatch=etag)
    assert await store.get("run-1") is None


async def test_a_stale_legacy_version_is_fenced(s3_backend: Backend) -> None:
    store = _store(s3_backend)
    await _old_build_put(s3_backend, "run-1", encode_checkpoint(make_checkpoint()), IfNoneMatch="*")
    stored = await store.get("run-1")
    assert stored is not None
    await store.put(make_checkpoint(partial_text="moved on"), expected_version=stored.version)
    with pytest.raises(CheckpointFenced):
        await store.put(make_checkpoint(partial_text="stale"), expected_version=stored.version)
    with pytest.raises(CheckpointFenced):
        await store.delete("run-1", expected_version=stored.version)


async def test_the_sharded_checkpoint_wins_and_its_delete_removes_both(
    s3_backend: Backend,
) -> None:
    store = _store(s3_backend)
    leftover = make_checkpoint(turn=0, partial_text="a turn whose delete was lost")
    await _old_build_put(s3_backend, "run-1", encode_checkpoint(leftover), IfNoneMatch="*")
    current = make_checkpoint(turn=1, partial_text="the turn now")
    version = await store.put(current, expected_version=None)
    stored = await store.get("run-1")
    assert stored is not None and (stored.checkpoint, stored.version) == (current, version)
    deletes: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        deletes.append(dict(params))

    s3_backend.client.meta.events.register("before-parameter-build.s3.DeleteObject", record)
    await store.delete("run-1", expected_version=version)
    s3_backend.client.meta.events.unregister("before-parameter-build.s3.DeleteObject", record)
    # The bucket policy refuses a delete without If-Match: the leftover goes at its own ETag.
    assert [d["Key"] for d in deletes] == [
        store.key_for("run-1"),
        proto.legacy_key(store.prefix, "run-1"),
    ]
    assert all(d.get("IfMatch") not in (None, "*") for d in deletes)
    # The older object must not come back as the run's checkpoint once the newer one is gone.
    assert await store.get("run-1") is None
    assert not await _exists(s3_backend, proto.legacy_key(store.prefix, "run-1"))


async def test_a_delete_at_a_legacy_version_leaves_a_newer_sharded_checkpoint(
    s3_backend: Backend,
) -> None:
    store = _store(s3_backend)
    await _old_build_put(s3_backend, "run-1", encode_checkpoint(make_checkpoint()), IfNoneMatch="*")
    judged = await store.get("run-1")
    assert judged is not None
    newer = make_checkpoint(turn=1, epoch=2)
    version = await store.put(newer, expected_version=None)
    await store.delete("run-1", expected_version=judged.version)
    stored = await store.get("run-1")
    assert stored is not None and (stored.checkpoint, stored.version) == (newer, version)


async def test_an_unconditional_delete_removes_both_layouts(s3_backend: Backend) -> None:
    store = _store(s3_backend)
    await _old_build_put(s3_backend, "run-1", encode_checkpoint(make_checkpoint()), IfNoneMatch="*")
    await store.put(make_checkpoint(turn=1), expected_version=None)
    await store.delete("run-1")
    assert await store.get("run-1") is None
    await store.delete("run-1")  # still idempotent


async def test_a_corrupt_legacy_object_is_deleted_at_the_version_it_reports(
    s3_backend: Backend,
) -> None:
    store = _store(s3_backend)
    await _old_build_put(s3_backend, "run-1", b"not json", IfNoneMatch="*")
    with pytest.raises(CheckpointCorrupt) as caught:
        await store.get("run-1")
    assert caught.value.version is not None
    await store.delete("run-1", expected_version=caught.value.version)
    assert await store.get("run-1") is None


@pytest.mark.parametrize("concurrency", [1, 16])
async def test_listing_finds_both_layouts_each_run_once(
    s3_backend: Backend, concurrency: int
) -> None:
    base = _store(s3_backend)
    store = S3StreamCheckpointStore(
        base.bucket, prefix=base.prefix, client=s3_backend.client, list_concurrency=concurrency
    )
    body = encode_checkpoint(make_checkpoint())
    for run_id in ("old-a", "old-b", "both"):
        await _old_build_put(s3_backend, run_id, body, IfNoneMatch="*")
    for run_id in ("new-a", "both"):
        await store.put(make_checkpoint(run_id), expected_version=None)
    # Not a checkpoint's: another shard's name for the run, and a foreign object.
    client: Any = s3_backend.client
    wrong_shard = "00" if proto.shard_of("new-a") != "00" else "01"
    await client.put_object(
        Bucket=store.bucket, Key=f"{store.prefix}{wrong_shard}/x.json", Body=b""
    )
    await client.put_object(Bucket=store.bucket, Key=f"{store.prefix}README.txt", Body=b"")
    listed = [run_id async for run_id in store.list_run_ids()]
    assert sorted(listed) == ["both", "new-a", "old-a", "old-b"]
    now = datetime.now(UTC)
    later = [r async for r in store.list_run_ids(modified_before=now + timedelta(hours=1))]
    assert sorted(later) == ["both", "new-a", "old-a", "old-b"]
    assert [r async for r in store.list_run_ids(modified_before=now - timedelta(hours=1))] == []
