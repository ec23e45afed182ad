"""Reading a checkpoint to judge it, and deleting one: the only module that deletes.

The verdicts are pure (:mod:`awaken_s3.streaming.fate`); this is the I/O around them.
:func:`read_checkpoint` maps a store's answers to what was found, :func:`settle_checkpoint`
reads, judges and performs the fate, :func:`delete_turn_checkpoint` deletes a committed turn's
checkpoint, and every delete goes through :func:`delete_at`, conditional on the version judged
(an object another writer put meanwhile is left alone, and a delete without a version is
never sent).

The commit is the authority: for a worker a failed delete is a warning (the checkpoint left
behind is stale, recognised by its turn index, and deleted or replaced later), never an
error (:func:`delete_checkpoint`). Operators' tools call :func:`delete_at`, which raises.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable
from typing import Final

from awaken_s3.errors import (
    CheckpointCorrupt,
    CheckpointFenced,
    CheckpointSchemaUnsupported,
    StreamCheckpointError,
)
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.fate import (
    Absent,
    Corrupt,
    Delete,
    Fate,
    Found,
    Judge,
    NewerSchema,
    Nothing,
    Replace,
    Resume,
    TurnStart,
    Unreadable,
    checkpoint_fate,
)
from awaken_s3.streaming.outcome import TurnCompleted

log = logging.getLogger("awaken_s3.checkpoint")

#: seconds the delete after a commit waits for a checkpoint put that outlasted its turn
LATE_PUT_WAIT: Final = 60.0


class Cleared(enum.Enum):
    """What is left of a checkpoint once a verdict was performed."""

    #: deleted, or nothing of it was there
    GONE = "gone"
    #: still there: kept by the verdict, a delete that failed, or one without a version
    LEFT = "left"
    #: another object took its place since it was judged: not this judgement's to delete
    REWRITTEN = "rewritten"


async def read_checkpoint(store: StreamCheckpointStore, run_id: str) -> Found:
    """One read of ``run_id``'s checkpoint, its errors mapped to what they say was found."""
    try:
        stored = await store.get(run_id)
    except CheckpointCorrupt as exc:
        return Corrupt(exc.version, str(exc))
    except CheckpointSchemaUnsupported as exc:
        return NewerSchema(exc.version, exc.schema_version)
    except StreamCheckpointError as exc:
        return Unreadable(exc)
    return Absent() if stored is None else stored


async def delete_at(store: StreamCheckpointStore, run_id: str, version: str | None) -> Cleared:
    """Delete ``run_id``'s checkpoint if it is still at ``version``. REWRITTEN when it is not;
    LEFT, without a request, when there is no version (never unconditional). Other store
    errors are raised."""
    if version is None:
        log.warning("run %s: a checkpoint without a version is never deleted", run_id)
        return Cleared.LEFT
    try:
        await store.delete(run_id, expected_version=version)
    except CheckpointFenced:
        return Cleared.REWRITTEN
    return Cleared.GONE


async def delete_checkpoint(
    store: StreamCheckpointStore, run_id: str, version: str | None
) -> Cleared:
    """:func:`delete_at` for a worker: a failed delete is logged and LEFT."""
    try:
        return await delete_at(store, run_id, version)
    except StreamCheckpointError as exc:
        log.warning("run %s: checkpoint delete failed: %s", run_id, exc)
        return Cleared.LEFT


async def perform(store: StreamCheckpointStore, run_id: str, fate: Fate) -> Cleared:
    """Carry a fate out: a Delete is performed; nothing stored is GONE; the rest is LEFT."""
    if isinstance(fate, Delete):
        log.info("run %s: deleting its checkpoint: %s", run_id, fate.reason)
        return await delete_checkpoint(store, run_id, fate.version)
    return Cleared.GONE if isinstance(fate, Nothing) else Cleared.LEFT


async def settle_checkpoint(store: StreamCheckpointStore, run_id: str, judge: Judge) -> Cleared:
    """Read ``run_id``'s checkpoint, judge it as ``judge`` and perform the verdict."""
    return await perform(
        store, run_id, checkpoint_fate(await read_checkpoint(store, run_id), judge)
    )


async def await_put(put: Awaitable[None], *, wait: float, run_id: str) -> bool:
    """Wait up to ``wait`` seconds for a put in flight; True when it ended."""
    try:
        async with asyncio.timeout(wait):
            await asyncio.shield(put)
    except TimeoutError:
        log.warning("run %s: a checkpoint put is still in flight after the turn", run_id)
        return False
    except Exception as exc:  # the put's own failure was logged where it happened
        log.debug("run %s: the late checkpoint put failed: %s", run_id, exc)
    return True


async def delete_turn_checkpoint(
    store: StreamCheckpointStore,
    run_id: str,
    turn_index: int,
    turn: TurnCompleted,
    *,
    thread_id: str,
    late_put_wait: float = LATE_PUT_WAIT,
) -> Cleared:
    """Delete the committed turn's checkpoint. GONE when none of it is left, REWRITTEN when
    another object was found in its place."""
    if turn.put_in_flight is not None:
        # A slow put outlasted the turn: it may still create or replace the object. Once it
        # ended, whatever is stored is known and judged below; if it does not end in time,
        # the checkpoint counts as left (a later turn or clean-up deletes it).
        if not await await_put(turn.put_in_flight, wait=late_put_wait, run_id=run_id):
            return Cleared.LEFT
    elif turn.checkpoint_version is not None:
        return await delete_checkpoint(store, run_id, turn.checkpoint_version)
    stats = turn.checkpoint_stats
    if turn.put_in_flight is None and stats.puts == 0 and stats.failures == 0:
        return Cleared.GONE  # the turn never wrote one
    # A put whose answer was lost may have landed: look, and judge what is there as the next
    # turn would (this turn's checkpoint, or an earlier one's, is stale now).
    fate = checkpoint_fate(
        await read_checkpoint(store, run_id), TurnStart(turn_index + 1, thread_id)
    )
    if isinstance(fate, Resume | Replace):
        return Cleared.GONE  # a later turn's object: nothing of this turn is left
    return await perform(store, run_id, fate)
