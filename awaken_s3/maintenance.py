"""Operators' chores over stream checkpoints: what is stale, and cleaning it.

The verdict is :func:`awaken_s3.streaming.fate.checkpoint_fate` over a checkpoint and its
run's committed state (the rule every other reader of a checkpoint follows too: the run
loop, the turn runner); the survey and the clean-up are thin loops around it. A checkpoint
is a hint, so deleting a stale one never loses committed work, and every delete is
conditional on the version that was judged: a checkpoint a live worker rewrote in the
meantime is kept. A corrupt object whose version the store could not tell is kept too (a
blind delete could remove a live writer's fresh checkpoint), and so is a checkpoint written
by a newer build (a higher ``schema_version``) while its run may still resume from it: a
newer worker may. Once the run has ended it is stale whatever wrote it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.stores.base import ListableCheckpointStore, StreamCheckpointStore
from awaken_s3.streaming.cleanup import Cleared, delete_at, read_checkpoint
from awaken_s3.streaming.fate import (
    Absent,
    Delete,
    LeaveNewer,
    RunRecord,
    Unreadable,
    checkpoint_fate,
    stale_reason,
    version_of,
)
from awaken_s3.threads.base import RunStore
from awaken_s3.threads.errors import RunNotFound
from awaken_s3.threads.models import RunState

log = logging.getLogger("awaken_s3.maintenance")

__all__ = [
    "KEPT_REWRITTEN",
    "KEPT_UNKNOWN_VERSION",
    "Cleaned",
    "Verdict",
    "clean",
    "clean_leftovers",
    "delete_stale",
    "judge_checkpoint",
    "kept_newer",
    "stale_reason",
    "survey",
]


@dataclass(frozen=True, slots=True)
class Verdict:
    run_id: str
    version: str | None
    checkpoint: StreamCheckpoint | None
    run: RunState | None
    #: None: keep it
    stale: str | None
    #: the object's schema_version when a newer build wrote it and its run may still resume
    #: from it (then it is kept)
    newer_schema: int | None = None


#: checkpoints judged at once by a survey: each verdict is two reads (the object, the run),
#: so 100,000 checkpoints judged one by one would take the sum of 200,000 round trips
SURVEY_CONCURRENCY = 32


async def survey(
    checkpoints: ListableCheckpointStore,
    threads: RunStore,
    *,
    now: datetime,
    max_age: timedelta | None = None,
    concurrency: int = SURVEY_CONCURRENCY,
) -> AsyncIterator[Verdict]:
    """A verdict for every checkpoint in the store, judging up to ``concurrency`` at once
    (in the listing's order within each batch; the listing promises no order)."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    batch: list[str] = []
    async for run_id in checkpoints.list_run_ids():
        batch.append(run_id)
        if len(batch) == concurrency:
            for verdict in await _judge_all(checkpoints, threads, batch, now, max_age):
                yield verdict
            batch = []
    for verdict in await _judge_all(checkpoints, threads, batch, now, max_age):
        yield verdict


async def _judge_all(
    checkpoints: StreamCheckpointStore,
    threads: RunStore,
    run_ids: list[str],
    now: datetime,
    max_age: timedelta | None,
) -> list[Verdict]:
    judged = await asyncio.gather(
        *(judge_checkpoint(checkpoints, threads, r, now=now, max_age=max_age) for r in run_ids),
        return_exceptions=True,
    )
    verdicts = []
    for verdict in judged:
        # Every read has ended by now; the first failure is raised as itself, as a survey
        # judging one at a time would have raised it.
        if isinstance(verdict, BaseException):
            raise verdict
        if verdict is not None:
            verdicts.append(verdict)
    return verdicts


async def judge_checkpoint(
    checkpoints: StreamCheckpointStore,
    threads: RunStore,
    run_id: str,
    *,
    now: datetime,
    max_age: timedelta | None = None,
) -> Verdict | None:
    """The verdict on ``run_id``'s checkpoint as it is stored now; None when it is gone."""
    found = await read_checkpoint(checkpoints, run_id)
    if isinstance(found, Absent):  # deleted since it was listed
        return None
    if isinstance(found, Unreadable):
        raise found.error  # the operator (or the sweeper's failure count) sees why
    try:
        run: RunState | None = await threads.get_run(run_id)
    except RunNotFound:
        run = None
    fate = checkpoint_fate(found, RunRecord(run, now=now, max_age=max_age))
    checkpoint: StreamCheckpoint | None = None
    if isinstance(found, StoredCheckpoint):
        checkpoint = found.checkpoint
    return Verdict(
        run_id,
        version_of(found),
        checkpoint,
        run,
        fate.reason if isinstance(fate, Delete) else None,
        newer_schema=fate.schema_version if isinstance(fate, LeaveNewer) else None,
    )


@dataclass(frozen=True, slots=True)
class Cleaned:
    verdict: Verdict
    #: "deleted", "would delete" (dry run) or "kept: <why>"
    action: str


KEPT_REWRITTEN = "kept: rewritten since it was judged"
KEPT_UNKNOWN_VERSION = "kept: its version is unknown, and deletes are never unconditional"


def kept_newer(schema_version: int) -> str:
    return f"kept: written by a newer build (schema_version {schema_version})"


async def clean(
    checkpoints: ListableCheckpointStore,
    threads: RunStore,
    *,
    now: datetime,
    max_age: timedelta | None = None,
    dry_run: bool = False,
) -> list[Cleaned]:
    """Survey the store, then delete every stale checkpoint."""
    verdicts = [v async for v in survey(checkpoints, threads, now=now, max_age=max_age)]
    return await delete_stale(checkpoints, verdicts, dry_run=dry_run)


async def clean_leftovers(
    checkpoints: ListableCheckpointStore,
    threads: RunStore,
    *,
    now: datetime,
    quiet_for: timedelta,
    limit: int = 500,
    rng: random.Random | None = None,
) -> list[Cleaned]:
    """The sweeper's share of the clean-up: delete the checkpoints of runs that ended (or
    whose turn was committed, or that are corrupt or have no run), among the objects nobody
    wrote for ``quiet_for``.

    This is what makes "no checkpoint outlives its run" hold whatever happened to the
    worker: a kill between the final commit and its delete whose queue record then ran out
    of receives, a cancel while the run waited, an abandoned run, a zombie's write after the
    end. Live runs are never touched (no ``max_age``). A checkpoint written within
    ``quiet_for`` is not even read: the listing says when each object was written, so a
    sweep costs the listing plus two reads per quiet object, at most ``limit`` of them,
    drawn at random from all the quiet ones so that no leftover waits for good behind
    checkpoints of runs that are merely waiting in a queue.
    """
    quiet = [r async for r in checkpoints.list_run_ids(modified_before=now - quiet_for)]
    (rng or random.Random()).shuffle(quiet)
    verdicts = []
    for run_id in quiet[:limit]:
        verdict = await judge_checkpoint(checkpoints, threads, run_id, now=now)
        if verdict is not None:
            verdicts.append(verdict)
    return await delete_stale(checkpoints, verdicts)


async def delete_stale(
    checkpoints: StreamCheckpointStore, verdicts: Iterable[Verdict], *, dry_run: bool = False
) -> list[Cleaned]:
    """Delete the stale checkpoints among ``verdicts``, each at the version judged.

    Checkpoints of a newer schema are reported as kept (and logged); live ones are skipped.
    """
    done: list[Cleaned] = []
    for verdict in verdicts:
        if verdict.newer_schema is not None:
            log.warning(
                "checkpoint of run %s has schema_version %d, newer than this build reads: kept",
                verdict.run_id,
                verdict.newer_schema,
            )
            done.append(Cleaned(verdict, kept_newer(verdict.newer_schema)))
            continue
        if verdict.stale is None:
            continue
        if verdict.version is None:
            done.append(Cleaned(verdict, KEPT_UNKNOWN_VERSION))
            continue
        if dry_run:
            done.append(Cleaned(verdict, "would delete"))
            continue
        cleared = await delete_at(checkpoints, verdict.run_id, verdict.version)
        done.append(Cleaned(verdict, "deleted" if cleared is Cleared.GONE else KEPT_REWRITTEN))
    return done
