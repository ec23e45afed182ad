"""Thread-store errors: one tree, rooted at :class:`ThreadStoreError`.

A store raises these and nothing else: every AWS client failure (a ``ClientError`` answer or
a transport error) that is not one of the outcomes below is translated
(:mod:`awaken_s3.threads.client_errors`), with the client's exception chained as the cause.

Outcomes of the contract (what the caller asked for could not be done as asked):

* ``ThreadNotFound``, ``ThreadExists``, ``RunNotFound``, ``RunExists``, ``RunActive``;
* ``LeaseUnavailable``, ``LeaseLost``, ``RunChanged`` (a sweeper's write lost its race);
* ``CommitConflict``: ``CommitFenced``, ``ThreadMovedOn``. They are told apart because
  callers react differently: a duplicate is done, a fenced worker stops silently, a thread
  that moved on is reloaded, never overwritten;
* ``ToolCallConflict``, ``ToolCallMismatch``, ``MessageTooLarge``.

Failures of the storage itself (what the caller asked for may well be fine):

=====================================================  ==========================
AWS answer                                             store error
=====================================================  ==========================
``ResourceNotFoundException`` (DynamoDB)               ``TableNotFound``
throttling beyond the client's retries (DynamoDB       ``StoreThrottled``
``ProvisionedThroughputExceededException``,
``ThrottlingException``, ``RequestLimitExceeded``, a
transaction cancelled for ``ThrottlingError`` /
``ProvisionedThroughputExceeded``; S3 ``SlowDown``)
a 5xx answer, or no answer (connection refused or      ``StoreUnavailable``
reset, timeout) beyond the client's retries
anything else (``AccessDeniedException``,              ``ThreadStoreError``
``ValidationException``, S3 ``NoSuchBucket``, ...)
=====================================================  ==========================
"""

from __future__ import annotations

from awaken_s3.errors import AwakenError


class ThreadStoreError(AwakenError):
    """Base of every thread-store error. Raised as is for a storage failure that none of the
    subclasses describes; its message names the operation, the table (or bucket) and the
    AWS error code, and the client's exception is its ``__cause__``."""


class TableNotFound(ThreadStoreError):
    """The DynamoDB table does not exist, or not in the region and account the client uses.

    A deployment or configuration fault, not a transient one: retrying will not help.
    ``table`` names it.
    """

    def __init__(self, message: str, *, table: str) -> None:
        super().__init__(message)
        self.table = table


class StoreUnavailable(ThreadStoreError):
    """The storage did not answer (connection refused or reset, a timeout) or answered with a
    5xx, and kept doing so through the client's retries. Transient: the same call may succeed
    later. For a write, whether it landed is unknown; every store write recognises its own
    earlier attempt, so repeating it is safe."""


class StoreThrottled(StoreUnavailable):
    """The storage throttled the request, and kept doing so through the client's retries
    (and, for a commit, the store's own). The request did not apply. Transient; when it
    persists, the table's capacity, a hot partition or an account limit needs attention."""


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
    """Renew/release/finish found another epoch, or a renewal found this worker's own lease
    already run out: this worker no longer drives the run."""


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


class ToolCallMismatch(ThreadStoreError):
    """The record under a tool call's key was made for another call (another tool, or another
    input): it must never answer this one. Retrying cannot help, so the run fails
    (``tool_call_mismatch``)."""


class MessageTooLarge(ThreadStoreError, ValueError):
    """A message cannot be stored: too large for an item and no offload bucket configured."""
