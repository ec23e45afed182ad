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

    ``version`` is the stored object's version token when the store read one, so that a
    caller deletes or replaces exactly the object it judged, conditionally.
    """

    def __init__(
        self, message: str, *, run_id: str | None = None, version: str | None = None
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.version = version


class CheckpointTooLarge(StreamCheckpointError, ValueError):
    """The encoded checkpoint exceeds the configured size limit."""


class StoreLocked(StreamCheckpointError):
    """A filesystem store directory is already owned by another process."""
