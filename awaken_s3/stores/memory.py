"""An in-process store with the same version semantics as S3."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime

from awaken_s3.errors import CheckpointFenced
from awaken_s3.ids import validate_run_id
from awaken_s3.models import (
    DEFAULT_MAX_CHECKPOINT_BYTES,
    StoredCheckpoint,
    StreamCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
)


class InMemoryStreamCheckpointStore:
    """Deterministic store for tests and single-process use.

    Bodies are kept encoded so that the size guard and the decoder run exactly
    as they do against S3.
    """

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        #: run id -> (body, version, Unix time it was written: S3's LastModified)
        self._objects: dict[str, tuple[bytes, str, float]] = {}
        self._clock = clock
        self._counter = itertools.count(1)
        self._lock = asyncio.Lock()
        self._max_bytes = max_bytes

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        validate_run_id(run_id)
        entry = self._objects.get(run_id)
        if entry is None:
            return None
        body, version, _ = entry
        checkpoint = decode_checkpoint(
            body, run_id=run_id, max_bytes=self._max_bytes, version=version
        )
        return StoredCheckpoint(checkpoint=checkpoint, version=version)

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        run_id = validate_run_id(checkpoint.run_id)
        body = encode_checkpoint(checkpoint, max_bytes=self._max_bytes)
        async with self._lock:
            current = self._objects.get(run_id)
            if expected_version is None and current is not None:
                raise CheckpointFenced(f"checkpoint for run {run_id} already exists", run_id=run_id)
            if expected_version is not None and (current is None or current[1] != expected_version):
                raise CheckpointFenced(
                    f"checkpoint for run {run_id} is not at version {expected_version}",
                    run_id=run_id,
                )
            return self._write(run_id, body)

    async def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        validate_run_id(run_id)
        async with self._lock:
            current = self._objects.get(run_id)
            if current is None:
                return
            if expected_version is not None and current[1] != expected_version:
                raise CheckpointFenced(
                    f"checkpoint for run {run_id} is not at version {expected_version}",
                    run_id=run_id,
                )
            del self._objects[run_id]

    async def list_run_ids(self, *, modified_before: datetime | None = None) -> AsyncIterator[str]:
        cutoff = None if modified_before is None else modified_before.timestamp()
        for run_id, (_, _, written) in sorted(self._objects.items()):
            if cutoff is None or written < cutoff:
                yield run_id

    # Test hooks: plant raw bytes, as a foreign or corrupted writer would.
    def put_raw(self, run_id: str, body: bytes) -> str:
        return self._write(run_id, body)

    def _write(self, run_id: str, body: bytes) -> str:
        version = f"m{next(self._counter)}"
        self._objects[run_id] = (body, version, self._clock())
        return version
