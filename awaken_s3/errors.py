"""Errors raised by stream-checkpoint stores.

Every store error derives from :class:`StreamCheckpointError`, so a caller
that treats checkpoints as best-effort hints can catch one class.
"""

from __future__ import annotations


class StreamCheckpointError(Exception):
    """Base class of every stream-checkpoint store error.

    Transport and backend failures are raised as this class itself, with the
    original exception chained as ``__cause__``.
    """

    def __init__(self, message: str, *, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


class CheckpointFenced(StreamCheckpointError):
    """A conditional put or delete lost: another writer owns the checkpoint.

    A fenced writer must stop writing; it never retries with a fresh version.
    """


class CheckpointCorrupt(StreamCheckpointError):
    """The stored object cannot be decoded into a checkpoint for this run.

    ``version`` is the version token (S3 ETag) of the object that was judged, when the store
    knows it: whoever deletes the object deletes it at that version, so a checkpoint a live
    writer put there meanwhile is kept.
    """

    def __init__(
        self, message: str, *, run_id: str | None = None, version: str | None = None
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.version = version


class CheckpointSchemaUnsupported(StreamCheckpointError):
    """The stored checkpoint was written by a newer build (a higher ``schema_version``).

    Not corrupt: a newer worker may still resume from it, so it is left in place, never
    deleted as garbage. ``version`` is the object's version token when known.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        version: str | None = None,
        schema_version: int,
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.version = version
        self.schema_version = schema_version


class CheckpointTooLarge(StreamCheckpointError, ValueError):
    """The encoded checkpoint exceeds the configured size limit."""


class StoreLocked(StreamCheckpointError):
    """A filesystem store directory is already owned by another process."""
