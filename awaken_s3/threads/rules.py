"""Pure rules shared by every backend that are not conditions of a write (no I/O).

The conditions that fence a stale worker are data, in :mod:`awaken_s3.threads.conditions`,
evaluated by the storage (or, in memory, by :mod:`awaken_s3.threads.evaluate`); what is left
here is arithmetic on records: the sweep shard of a run, the run a commit leaves behind, and
whether a create_run repeats an earlier request.
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


def active_run_blocks(active: RunState | None, run_id: str) -> bool:
    """A thread whose latest run is ``active`` refuses a new run ``run_id`` (a retried create
    of the active run itself is answered by the run-exists path instead)."""
    return active is not None and active.run_id != run_id and not active.status.terminal


def holds_lease(run: RunState, worker: str, epoch: int) -> bool:
    """A run as read is held by ``worker`` at ``epoch``: the read-side twin of the store's
    :func:`awaken_s3.threads.conditions.lease_held` (tests/threads/test_evaluate.py holds the
    two together), judged on the model without turning the run into an item."""
    return run.lease.owner == worker and run.lease.epoch == epoch


def expired_lease(run: RunState, epoch: int) -> str:
    """Why a renewal of ``run`` at ``epoch`` was refused although the lease is still ours."""
    return (
        f"run {run.run_id}: the lease of epoch {epoch} ran out at {run.lease.lease_until:.3f}; "
        "an expired lease is never renewed"
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
