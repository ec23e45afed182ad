"""Thread-store errors.

Commit conflicts are told apart because callers react differently: a duplicate is done,
a fenced worker stops silently, a thread that moved on is reloaded, never overwritten.
"""

from __future__ import annotations


class ThreadStoreError(Exception):
    """Base of every thread-store error; transport failures chain the cause."""


class ThreadNotFound(ThreadStoreError):
    """No such thread, or the thread belongs to another owner (existence is not leaked)."""


class ThreadExists(ThreadStoreError):
    pass


class RunNotFound(ThreadStoreError):
    pass


class RunExists(ThreadStoreError):
    pass


class RunActive(ThreadStoreError):
    """The thread already has a run that has not ended: one live run per thread, because two
    would race for the thread's next message positions and one of them would fail later."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class RunChanged(ThreadStoreError):
    """A sweeper's write found the run changed since it was read (claimed, progressed, or
    rescued by another sweeper): the run no longer needs this sweeper."""


class LeaseUnavailable(ThreadStoreError):
    """The run is leased by a live worker, or is not in a runnable status."""


class LeaseLost(ThreadStoreError):
    """Renew/release/finish found another epoch: this worker no longer drives the run."""


class CommitConflict(ThreadStoreError):
    """A turn commit's condition failed. Never retried as is.

    (A commit that finds itself already applied is not a conflict: ``commit_turn`` returns
    ``CommitResult(duplicate=True)``.)
    """


class CommitFenced(CommitConflict):
    """A newer lease epoch owns the run: this worker is a zombie."""


class ThreadMovedOn(CommitConflict):
    """The thread or run is no longer where this worker expected (other messages, other turn,
    or the run left ``running``, e.g. cancelled)."""


class ToolCallConflict(ThreadStoreError):
    """A tool-call claim or result lost its condition (another epoch took the call over)."""


class MessageTooLarge(ThreadStoreError, ValueError):
    """A message cannot be stored: too large for an item and no offload bucket configured."""
