"""The stream-checkpoint store contract."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Protocol, runtime_checkable

from awaken_s3.models import StoredCheckpoint, StreamCheckpoint


@runtime_checkable
class StreamCheckpointStore(Protocol):
    """Conditional storage of one checkpoint per run.

    Versions are opaque tokens (an S3 ETag, a counter): a writer passes back
    the last version it saw, so a stale writer is fenced by the storage itself.
    """

    async def get(self, run_id: str) -> StoredCheckpoint | None: ...

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        """Create (``expected_version=None``: must not exist) or replace (must match).

        Returns the new version. Raises CheckpointFenced when the condition fails.
        """
        ...

    async def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        """Idempotent; conditional when ``expected_version`` is given."""
        ...


@runtime_checkable
class ListableCheckpointStore(StreamCheckpointStore, Protocol):
    """A store that can enumerate its checkpoints (for operators' list and clean).

    Not part of the streaming path: a worker only ever addresses its own run.
    """

    def list_run_ids(self, *, modified_before: datetime | None = None) -> AsyncIterator[str]:
        """Run ids that have a checkpoint, in no promised order; with ``modified_before``,
        only those whose object was last written before that instant.

        Objects whose names are not a valid run id's are skipped: they are not ours.
        """
        ...
