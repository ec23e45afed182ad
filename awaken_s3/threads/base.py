"""The thread store's contracts, one per thing a caller holds.

* :class:`RunStore`: threads and their messages, runs with their lease, and the turn commit.
  These share transactions: ``create_run`` appends to the thread and creates the run in one
  write, and a commit appends messages and advances the run in one write.
* :class:`ToolCallLedger`: at-most-once records of tool calls, claimed before a tool runs and
  finished after. A claim holds only while the claimer's epoch holds the run lease.
* :class:`RunSweepStore`: the sweeper's view, runs nobody drives, through a sparse index.
* :class:`ThreadStore`: ``RunStore`` + ``ToolCallLedger``, what the run loop drives a run with.

Callers depend on the narrowest of these they use. Both backends implement all of them
through one class (:class:`~awaken_s3.threads.persistence.BaseThreadStore`), because the
parts are not independent in storage: a ledger claim is checked against the run's epoch in
the same DynamoDB transaction (a ``ConditionCheck`` on the run item beside the put of the
tool-call item, which shares the run's partition), and the sweeper's writes are conditions on
the run item itself. Splitting the storage would lose those fences.

Besides the errors each method documents, any method may raise the storage errors of
:mod:`awaken_s3.threads.errors` (``TableNotFound``, ``StoreThrottled``, ``StoreUnavailable``,
or a plain ``ThreadStoreError``), and never a raw client error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads.models import (
    CommitResult,
    RunSettings,
    RunState,
    RunStatus,
    Thread,
    ToolCallRecord,
    TurnCommit,
)


@runtime_checkable
class RunStore(Protocol):
    """Threads, messages and runs: every write that decides a run's fate is conditional,
    checked by the storage itself."""

    async def create_thread(
        self, thread_id: str, *, owner: str, metadata: Mapping[str, str] | None = None
    ) -> Thread:
        """Raises ThreadExists."""
        ...

    async def get_thread(self, thread_id: str, *, owner: str | None = None) -> Thread:
        """Raises ThreadNotFound, also when ``owner`` is given and is not the thread's owner."""
        ...

    async def load_messages(self, thread_id: str) -> list[Message]:
        """The committed messages, in order (offloaded bodies read back); an unknown thread
        has none (one read, not two: call :meth:`get_thread` to tell it apart)."""
        ...

    async def create_run(
        self,
        run_id: str,
        *,
        thread_id: str,
        owner: str,
        settings: RunSettings,
        messages: Sequence[Message] = (),
    ) -> RunState:
        """Append ``messages`` to the thread and create a queued run, atomically.

        Raises RunExists, ThreadNotFound (also for a foreign owner), RunActive while another
        run of the thread has not ended, ThreadMovedOn when the thread changed while appending.
        """
        ...

    async def get_run(self, run_id: str) -> RunState:
        """Raises RunNotFound."""
        ...

    async def claim_run(self, run_id: str, *, worker: str, lease_seconds: float) -> RunState:
        """Take the lease (expired, free, or already ours) of a runnable run; bumps the epoch.

        Raises LeaseUnavailable, RunNotFound.
        """
        ...

    async def renew_lease(
        self, run_id: str, *, worker: str, epoch: int, lease_seconds: float
    ) -> RunState:
        """Extend a live lease to ``lease_seconds`` from now.

        Raises LeaseLost when another epoch holds the run, and also when this worker's own
        lease has already run out: an expired lease is never revived (the run is claimed
        afresh, at a new epoch)."""
        ...

    async def release_lease(
        self,
        run_id: str,
        *,
        worker: str,
        epoch: int,
        status: RunStatus = RunStatus.SUSPENDED,
        idle_suspensions: int = 0,
    ) -> RunState:
        """Give the lease up now (so the next invocation needs not wait), leaving ``status``
        and recording ``idle_suspensions`` (suspensions in a row without progress).

        Raises LeaseLost.
        """
        ...

    async def finish_run(
        self,
        run_id: str,
        *,
        worker: str,
        epoch: int,
        status: RunStatus,
        error: ClassifiedError | None = None,
    ) -> RunState:
        """Set a terminal status (and the classified error of a failed run); releases the lease.

        Raises LeaseLost.
        """
        ...

    async def cancel_run(self, run_id: str) -> RunState:
        """Mark a non-terminal run cancelled (the API does this; the worker notices).

        Returns the run unchanged when it already ended.
        """
        ...

    async def commit_turn(self, commit: TurnCommit) -> CommitResult:
        """Append the turn's messages and advance the run, all or nothing.

        Returns ``duplicate=True`` when an earlier attempt of the same commit already landed.
        Raises CommitFenced, ThreadMovedOn (never retried as is).
        """
        ...


@runtime_checkable
class ToolCallLedger(Protocol):
    """At-most-once records of tool calls, one per ``(run_id, turn, tool_use_id)``.

    ``turn`` is the run's ``turn`` counter when the call runs (the model turns committed so
    far): providers may repeat call ids from one turn to the next (OpenAI-compatible servers
    that send none get ``call_<index>``), so the id alone does not name a call. A record
    holds the tool's name and a digest of the call's input, and answers only that call.

    Not separable from the runs in storage: a claim or reclaim is written only while the
    claimer's ``epoch`` still holds the run's lease, checked in the same transaction as the
    write, so a fenced worker never starts a side effect. The implementations therefore live
    in the same class as the :class:`RunStore`.
    """

    async def claim_tool_call(
        self,
        run_id: str,
        tool_use_id: str,
        *,
        turn: int,
        name: str,
        input_digest: str,
        epoch: int,
    ) -> tuple[ToolCallRecord, bool]:
        """Claim a call before running it, while ``epoch`` holds the run lease.

        Returns ``(record, True)`` when this call claimed it, ``(existing, False)`` when the
        call was already claimed (and maybe finished, or timed out), or when it was taken over
        from a legacy record of the same call (``adopted``: its outcome unknown). Raises
        ToolCallMismatch when the record under the key is for another tool or input; LeaseLost.
        """
        ...

    async def reclaim_tool_call(
        self, run_id: str, tool_use_id: str, *, turn: int, epoch: int, previous_epoch: int
    ) -> ToolCallRecord:
        """Take over a call claimed by an earlier epoch that has no result (still claimed, or
        timed out); counts one more attempt.

        Raises ToolCallConflict when someone else took it over or it finished; LeaseLost.
        """
        ...

    async def time_out_tool_call(
        self, run_id: str, tool_use_id: str, *, turn: int, epoch: int
    ) -> ToolCallRecord:
        """Record that ``epoch``'s attempt ran out of time (outcome unknown, ``timeouts`` + 1);
        raises ToolCallConflict when ``epoch`` no longer holds the call."""
        ...

    async def finish_tool_call(
        self,
        run_id: str,
        tool_use_id: str,
        *,
        turn: int,
        epoch: int,
        content: str,
        is_error: bool,
        timed_out: bool = False,
    ) -> ToolCallRecord:
        """Record the result (``timed_out``: it says the attempt ran out of time); raises
        ToolCallConflict when ``epoch`` no longer holds the call."""
        ...

    async def get_tool_call(
        self, run_id: str, tool_use_id: str, *, turn: int | None
    ) -> ToolCallRecord | None:
        """The record of a call (``turn`` None: the legacy key, the id alone)."""
        ...

    async def list_tool_calls(self, run_id: str) -> list[ToolCallRecord]:
        """Every record of the run, legacy ones included, in key order."""
        ...


@runtime_checkable
class ThreadStore(RunStore, ToolCallLedger, Protocol):
    """What the run loop drives a run with: its runs and its tool calls.

    Both backends (:class:`~awaken_s3.threads.memory.InMemoryThreadStore`,
    :class:`~awaken_s3.threads.dynamo.DynamoThreadStore`) implement it, and
    :class:`RunSweepStore` besides.
    """


@runtime_checkable
class RunSweepStore(Protocol):
    """What the sweeper needs: runs nobody drives, found through a sparse index.

    A run is in the index from its creation until it ends; its ``sweep_at`` moves forward
    with every claim, renewal and release, so only a run that nobody claimed, renewed or
    released for a grace period comes up.
    """

    async def stalled_runs(self, *, now: float, limit: int = 100) -> list[str]:
        """Ids of runs whose ``sweep_at`` is at or before ``now`` (the index is eventually
        consistent: re-read each run before acting on it)."""
        ...

    async def get_run(self, run_id: str) -> RunState: ...

    async def mark_rescued(
        self, run: RunState, *, rescues: int, fruitless: int, now: float, next_in: float
    ) -> RunState:
        """Record a rescue of ``run`` as read: ``rescues`` in a row (``fruitless`` of them
        followed by a claim that committed nothing), at its message count and epoch, and
        push ``sweep_at`` ``next_in`` seconds ahead, so exactly one sweeper re-sends it.

        Raises RunChanged when the run was claimed, rescued or ended since it was read.
        """
        ...

    async def abandon_run(self, run: RunState, *, error: ClassifiedError, now: float) -> RunState:
        """Fail ``run`` (as read) with ``error``: nobody could make it progress.

        Raises RunChanged when the run was claimed, rescued or ended since it was read.
        """
        ...
