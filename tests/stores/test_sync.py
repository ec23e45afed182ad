"""The blocking face: the same stores, driven from plain synchronous code."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from awaken_s3.errors import CheckpointFenced, StreamCheckpointError
from awaken_s3.stores.fs import FsStreamCheckpointStore
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.stores.sync import SyncStreamCheckpointStore
from tests.fixtures.aws import fresh_name
from tests.stores.conftest import make_checkpoint


@pytest.fixture(params=["memory", "fs", "s3"])
def sync_store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SyncStreamCheckpointStore[Any]]:
    if request.param == "memory":
        inner: Any = InMemoryStreamCheckpointStore()
    elif request.param == "fs":
        inner = FsStreamCheckpointStore(tmp_path)
    else:
        endpoint = request.getfixturevalue("moto_inprocess_url")
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        bucket = fresh_name("b")
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=bucket)
        # The store builds (and later closes) its client on the wrapper's loop.
        inner = S3StreamCheckpointStore(bucket)
    store: SyncStreamCheckpointStore[Any] = SyncStreamCheckpointStore(inner)
    try:
        yield store
    finally:
        store.close()


def test_put_get_replace_delete_from_synchronous_code(
    sync_store: SyncStreamCheckpointStore[Any],
) -> None:
    version = sync_store.put(make_checkpoint(partial_text="a"), expected_version=None)
    newer = sync_store.put(make_checkpoint(partial_text="ab"), expected_version=version)
    stored = sync_store.get("run-1")
    assert stored is not None
    assert (stored.checkpoint.partial_text, stored.version) == ("ab", newer)
    with pytest.raises(CheckpointFenced):
        sync_store.put(make_checkpoint(partial_text="stale"), expected_version=version)
    with pytest.raises(CheckpointFenced):
        sync_store.delete("run-1", expected_version=version)
    sync_store.delete("run-1", expected_version=newer)
    assert sync_store.get("run-1") is None


def test_threads_racing_one_version_have_exactly_one_winner(
    sync_store: SyncStreamCheckpointStore[Any],
) -> None:
    base = sync_store.put(make_checkpoint(), expected_version=None)
    outcomes: list[str | BaseException] = []
    lock = threading.Lock()

    def contend(i: int) -> None:
        try:
            result: str | BaseException = sync_store.put(
                make_checkpoint(writer=f"t{i}"), expected_version=base
            )
        except CheckpointFenced as exc:
            result = exc
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(isinstance(o, str) for o in outcomes) == 1
    assert sum(isinstance(o, CheckpointFenced) for o in outcomes) == 7


async def test_refuses_to_run_inside_an_event_loop() -> None:
    store = SyncStreamCheckpointStore(InMemoryStreamCheckpointStore())
    try:
        with pytest.raises(RuntimeError, match="event loop"):
            store.get("run-1")
    finally:
        # Closing needs no loop of its own beyond the private one.
        await asyncio.to_thread(store.close)


def test_close_closes_the_wrapped_store(tmp_path: Path) -> None:
    with SyncStreamCheckpointStore(FsStreamCheckpointStore(tmp_path)) as store:
        store.put(make_checkpoint(), expected_version=None)
    with pytest.raises(RuntimeError, match="closed"):
        store.get("run-1")
    # The directory lock went with it: a new owner can open the directory.
    with SyncStreamCheckpointStore(FsStreamCheckpointStore(tmp_path)) as reopened:
        assert reopened.get("run-1") is not None


def test_close_closes_an_owned_s3_client(
    moto_inprocess_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_inprocess_url)
    bucket = fresh_name("b")
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=bucket)
    inner = S3StreamCheckpointStore(bucket)
    with SyncStreamCheckpointStore(inner) as store:
        store.put(make_checkpoint(), expected_version=None)
    with pytest.raises(StreamCheckpointError, match="closed"):
        asyncio.run(inner.get("run-1"))
