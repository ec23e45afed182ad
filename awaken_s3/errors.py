"""The root of every error awaken-s3 raises, and the errors of the stream-checkpoint stores.

Every exception class of the package derives from :class:`AwakenError`, so a caller can tell
the package's own failures from everything else with one class. Under it, each part keeps its
own documented base (docs/ARCHITECTURE.md, "Errors: one tree"):

* :class:`StreamCheckpointError`: every checkpoint-store error, so a caller that treats
  checkpoints as best-effort hints can catch one class;
* :class:`awaken_s3.threads.errors.ThreadStoreError`: every thread-store error;
* :class:`awaken_s3.streaming.errors.ProviderError`: every provider error, classified by type;
* the errors of configuration (``SettingsError``, ``ConfigError``), of ids, agents and tools,
  each also a subclass of the built-in it always was (``ValueError``, ``TypeError``, ...).
"""

from __future__ import annotations


class AwakenError(Exception):
    """Base class of every exception awaken-s3 defines."""


class StreamCheckpointError(AwakenError):
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


class SettingsError(AwakenError, ValueError):
    """A required setting is missing or malformed.

    Defined here, not beside the settings models (:mod:`awaken_s3.settings`, which re-exports
    it): code that runs when a handler module is imported raises it without loading
    pydantic-settings (the worker's handler applies the tools' environment at its import)."""
