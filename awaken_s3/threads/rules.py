"""Pure lease and commit rules shared by every backend (no I/O).

The DynamoDB store states these rules as condition expressions; the in-memory store evaluates
them here directly; the contract suite checks that both agree.
"""

from __future__ import annotations

from collections.abc import Sequence

from awaken_s3.threads.models import (
    Lease,
    RunSettings,
    RunState,
    RunStatus,
    ToolCallRecord,
    ToolCallStatus,
    TurnCommit,
)


def can_claim(run: RunState, worker: str, *, now: float) -> bool:
    """A runnable run whose lease expired (or was never taken), or one this worker holds."""
    if not run.status.runnable:
        return False
    return run.lease.owner is None or run.lease.lease_until <= now or run.lease.owner == worker


def apply_claim(run: RunState, worker: str, *, now: float, lease_seconds: float) -> RunState:
    # Every claim bumps the epoch, even a re-claim by the same worker id: a restarted process
    # reusing its id must still fence its earlier incarnation.
    lease = Lease(owner=worker, epoch=run.lease.epoch + 1, lease_until=now + lease_seconds)
    return run.with_(status=RunStatus.RUNNING, lease=lease, updated_at=now)


def holds_lease(run: RunState, worker: str, epoch: int) -> bool:
    return run.lease.owner == worker and run.lease.epoch == epoch


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


def same_run_request(
    existing: RunState, *, thread_id: str, owner: str, settings: RunSettings
) -> bool:
    """A create_run repeating an earlier one (an API retry): answered with the same run."""
    return (existing.thread_id, existing.owner, existing.settings) == (thread_id, owner, settings)
