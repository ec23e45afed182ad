"""Pure lease and commit rules shared by every backend (no I/O).

The DynamoDB store states these rules as condition expressions; the in-memory store evaluates
them here directly; the contract suite checks that both agree.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Final

from awaken_s3 import settings
from awaken_s3.messages import Message
from awaken_s3.threads.models import (
    Lease,
    RunSettings,
    RunState,
    RunStatus,
    ToolCallRecord,
    ToolCallStatus,
    TurnCommit,
)

#: the sweeper's index is spread over this many partition-key values (``sweep_shard``), so
#: lease renewals of many live runs never concentrate on one index partition
SWEEP_SHARDS: Final = 8
#: how long past the moment a run should next have been driven the sweeper waits before it
#: re-sends the run (defined with the settings, which must not load the run model to read it)
DEFAULT_SWEEP_GRACE: Final = settings.DEFAULT_SWEEP_GRACE


def sweep_shard(run_id: str) -> str:
    return str(int(hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8], 16) % SWEEP_SHARDS)


def can_claim(run: RunState, worker: str, *, now: float) -> bool:
    """A runnable run whose lease expired (or was never taken), or one this worker holds."""
    if not run.status.runnable:
        return False
    return run.lease.owner is None or run.lease.lease_until <= now or run.lease.owner == worker


def apply_claim(
    run: RunState,
    worker: str,
    *,
    now: float,
    lease_seconds: float,
    sweep_grace: float = DEFAULT_SWEEP_GRACE,
) -> RunState:
    # Every claim bumps the epoch, even a re-claim by the same worker id: a restarted process
    # reusing its id must still fence its earlier incarnation.
    lease = Lease(owner=worker, epoch=run.lease.epoch + 1, lease_until=now + lease_seconds)
    return run.with_(
        status=RunStatus.RUNNING,
        lease=lease,
        updated_at=now,
        sweep_at=lease.lease_until + sweep_grace,
        previous_lease_until=run.lease.lease_until,
    )


def apply_renewal(
    run: RunState, *, now: float, lease_seconds: float, sweep_grace: float = DEFAULT_SWEEP_GRACE
) -> RunState:
    lease = Lease(run.lease.owner, run.lease.epoch, now + lease_seconds)
    return run.with_(lease=lease, updated_at=now, sweep_at=lease.lease_until + sweep_grace)


def apply_release(
    run: RunState,
    *,
    epoch: int,
    status: RunStatus,
    now: float,
    idle_suspensions: int,
    sweep_grace: float = DEFAULT_SWEEP_GRACE,
) -> RunState:
    """The lease given up, ``status`` left behind; a cancel that landed meanwhile wins."""
    released = Lease(None, epoch, 0.0)
    if run.status.terminal:
        return run.with_(lease=released, updated_at=now, sweep_at=None)
    return run.with_(
        lease=released,
        status=status,
        updated_at=now,
        # The caller is about to send the message that drives the run next.
        sweep_at=now + sweep_grace,
        idle_suspensions=idle_suspensions,
    )


def sweep_holds(stored: RunState, read: RunState, *, now: float) -> bool:
    """A sweeper's write (rescue or abandon) of ``read`` may apply to ``stored``: still the
    same epoch and rescue count, still due, still runnable and nobody holds a live lease."""
    return (
        stored.lease.epoch == read.lease.epoch
        and stored.rescues == read.rescues
        and stored.sweep_at is not None
        and stored.sweep_at <= now
        and stored.status.runnable
        and (stored.lease.owner is None or stored.lease.lease_until <= now)
    )


def active_run_blocks(active: RunState | None, run_id: str) -> bool:
    """A thread whose latest run is ``active`` refuses a new run ``run_id`` (a retried create
    of the active run itself is answered by the run-exists path instead)."""
    return active is not None and active.run_id != run_id and not active.status.terminal


def holds_lease(run: RunState, worker: str, epoch: int) -> bool:
    return run.lease.owner == worker and run.lease.epoch == epoch


def renewal_holds(run: RunState, worker: str, epoch: int, *, now: float) -> bool:
    """A renewal applies only to the holder's lease while it is still live: once it has run
    out, the queue may already have handed the run to another delivery, which must be able to
    claim it at a new epoch instead of finding a lease revived behind its back."""
    return holds_lease(run, worker, epoch) and run.lease.lease_until > now


def expired_lease(run: RunState, epoch: int) -> str:
    """Why a renewal of ``run`` at ``epoch`` was refused although the lease is still ours."""
    return (
        f"run {run.run_id}: the lease of epoch {epoch} ran out at {run.lease.lease_until:.3f}; "
        "an expired lease is never renewed"
    )


def commit_condition_holds(run: RunState, commit: TurnCommit) -> bool:
    return (
        run.lease.epoch == commit.epoch
        and run.turn == commit.expected_turn
        and run.message_count == commit.expected_message_count
        and run.status == RunStatus.RUNNING
    )


def apply_commit(commit: TurnCommit, *, now: float) -> RunState:
    """The run state after ``commit`` lands on the state it was based on."""
    base = commit.base
    changes: dict[str, object] = {
        "turn": base.turn + (1 if commit.advance_turn else 0),
        "message_count": base.message_count + len(commit.messages),
        "usage": base.usage + commit.usage,
        "updated_at": now,
    }
    if commit.stop_reason is not None:
        changes["stop_reason"] = commit.stop_reason
    if commit.final_status is not None:
        changes["status"] = commit.final_status
        changes["lease"] = Lease(owner=None, epoch=base.lease.epoch, lease_until=0.0)
        changes["sweep_at"] = None
    if commit.error is not None:
        changes["error"] = commit.error
    return base.with_(**changes)


def message_positions(commit: TurnCommit) -> Sequence[int]:
    start = commit.expected_message_count
    return range(start, start + len(commit.messages))


def can_reclaim_tool(record: ToolCallRecord, *, previous_epoch: int) -> bool:
    return record.status == ToolCallStatus.CLAIMED and record.epoch == previous_epoch


def can_finish_tool(record: ToolCallRecord, *, epoch: int) -> bool:
    return record.status == ToolCallStatus.CLAIMED and record.epoch == epoch


# -- "did my earlier attempt already do this?"
#
# A write whose response was lost is retried (by botocore or by us); the retry's condition
# then fails *because the first attempt landed*. These predicates recognise that state, so
# the retry reports success instead of a conflict.


def release_applied(run: RunState, *, epoch: int, status: RunStatus) -> bool:
    """``run`` is what a release (or finish) to ``status`` by ``epoch`` leaves behind."""
    return (
        run.lease.owner is None
        and run.lease.epoch == epoch
        and (run.status == status or run.status.terminal)
    )


def tool_reclaim_applied(record: ToolCallRecord, *, epoch: int) -> bool:
    return record.status == ToolCallStatus.CLAIMED and record.epoch == epoch


def tool_finish_applied(
    record: ToolCallRecord, *, epoch: int, content: str, is_error: bool
) -> bool:
    return (
        record.status == ToolCallStatus.FINISHED
        and record.epoch == epoch
        and record.content == content
        and record.is_error == is_error
    )


def run_request_digest(settings: RunSettings, messages: Sequence[Message]) -> str:
    """What a create_run asks for, as one stable value: its settings and its messages."""
    digest = hashlib.sha256()
    digest.update(json.dumps(dataclasses.asdict(settings), sort_keys=True).encode("utf-8"))
    for message in messages:
        digest.update(b"\0")
        digest.update(message.model_dump_json().encode("utf-8"))
    return digest.hexdigest()


def same_run_request(
    existing: RunState,
    *,
    thread_id: str,
    owner: str,
    settings: RunSettings,
    request_digest: str | None = None,
) -> bool:
    """A create_run repeating an earlier one (an API retry): answered with the same run.

    The same run id with another message is a different request, not a retry: comparing
    settings alone would answer it with the old run and silently drop the new message.
    """
    if (
        existing.request_digest is not None
        and request_digest is not None
        and existing.request_digest != request_digest
    ):
        return False
    return (existing.thread_id, existing.owner, existing.settings) == (thread_id, owner, settings)
