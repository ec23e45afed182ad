"""Operators' chores over stream checkpoints: what is stale, and cleaning it.

The verdict is a pure function of a checkpoint and its run's committed state;
the survey and the clean-up are thin loops around it. A checkpoint is a hint,
so deleting a stale one never loses committed work, and every delete is
conditional on the version that was judged: a checkpoint a live worker
rewrote in the meantime is kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from awaken_s3.errors import CheckpointCorrupt, CheckpointFenced
from awaken_s3.models import StreamCheckpoint
from awaken_s3.stores.base import ListableCheckpointStore, StreamCheckpointStore
from awaken_s3.threads.base import ThreadStore
from awaken_s3.threads.errors import RunNotFound
from awaken_s3.threads.models import RunState


def stale_reason(
    checkpoint: StreamCheckpoint | None,
    run: RunState | None,
    *,
    now: datetime,
    max_age: timedelta | None = None,
) -> str | None:
    """Why the checkpoint can go, or None while a run may still resume from it.

    ``checkpoint`` is None for an object that cannot be decoded; ``run`` is None
    when the run does not exist. ``max_age`` also retires checkpoints of live runs
    that nobody has touched for that long (their runs restart the turn).
    """
    if checkpoint is None:
        return "corrupt: not a readable checkpoint"
    if run is None:
        return "its run does not exist"
    if not run.status.runnable:
        return f"its run is {run.status.value}"
    if checkpoint.turn < run.turn:
        return f"turn {checkpoint.turn} is already committed (the run is at turn {run.turn})"
    if max_age is not None and now - checkpoint.updated_at > max_age:
        return f"untouched since {checkpoint.updated_at.isoformat(timespec='seconds')}"
    return None


@dataclass(frozen=True, slots=True)
class Verdict:
    run_id: str
    version: str | None
    checkpoint: StreamCheckpoint | None
    run: RunState | None
    #: None: keep it
    stale: str | None


async def survey(
    checkpoints: ListableCheckpointStore,
    threads: ThreadStore,
    *,
    now: datetime,
    max_age: timedelta | None = None,
) -> AsyncIterator[Verdict]:
    """A verdict for every checkpoint in the store."""
    async for run_id in checkpoints.list_run_ids():
        checkpoint: StreamCheckpoint | None = None
        version: str | None = None
        try:
            stored = await checkpoints.get(run_id)
        except CheckpointCorrupt:
            stored = None
        else:
            if stored is None:  # deleted since it was listed
                continue
            checkpoint, version = stored.checkpoint, stored.version
        try:
            run: RunState | None = await threads.get_run(run_id)
        except RunNotFound:
            run = None
        yield Verdict(
            run_id,
            version,
            checkpoint,
            run,
            stale_reason(checkpoint, run, now=now, max_age=max_age),
        )


@dataclass(frozen=True, slots=True)
class Cleaned:
    verdict: Verdict
    #: "deleted", "would delete" (dry run) or "kept: <why>"
    action: str


async def clean(
    checkpoints: ListableCheckpointStore,
    threads: ThreadStore,
    *,
    now: datetime,
    max_age: timedelta | None = None,
    dry_run: bool = False,
) -> list[Cleaned]:
    """Survey the store, then delete every stale checkpoint."""
    verdicts = [v async for v in survey(checkpoints, threads, now=now, max_age=max_age)]
    return await delete_stale(checkpoints, verdicts, dry_run=dry_run)


async def delete_stale(
    checkpoints: StreamCheckpointStore, verdicts: Iterable[Verdict], *, dry_run: bool = False
) -> list[Cleaned]:
    """Delete the stale checkpoints among ``verdicts``, each at the version judged."""
    done: list[Cleaned] = []
    for verdict in verdicts:
        if verdict.stale is None:
            continue
        if dry_run:
            done.append(Cleaned(verdict, "would delete"))
            continue
        try:
            # A corrupt object has no version worth keeping: nobody can resume from it.
            await checkpoints.delete(verdict.run_id, expected_version=verdict.version)
        except CheckpointFenced:
            done.append(Cleaned(verdict, "kept: rewritten since it was judged"))
            continue
        done.append(Cleaned(verdict, "deleted"))
    return done
