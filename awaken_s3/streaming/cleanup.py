"""Deleting a turn's checkpoint after the caller committed the turn.

The commit is the authority: a failed delete is a warning (the checkpoint left behind is
stale, recognised by its turn index, and deleted or replaced later), never an error. Every
delete is conditional on the version judged, so an object another writer put meanwhile is
left alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Final

from awaken_s3.errors import CheckpointFenced, StreamCheckpointError
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.outcome import TurnCompleted

log = logging.getLogger("awaken_s3.checkpoint")

#: seconds the delete after a commit waits for a checkpoint put that outlasted its turn
LATE_PUT_WAIT: Final = 60.0


async def delete_checkpoint(store: StreamCheckpointStore, run_id: str, version: str) -> bool | None:
    """True when deleted, False when the delete failed, None when someone rewrote the
    object meanwhile (not ours to judge)."""
    try:
        await store.delete(run_id, expected_version=version)
    except CheckpointFenced:
        return None
    except StreamCheckpointError as exc:
        log.warning("run %s: checkpoint delete failed: %s", run_id, exc)
        return False
    return True


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
    late_put_wait: float = LATE_PUT_WAIT,
) -> bool | None:
    """Delete the committed turn's checkpoint; True when none of it is left, None when
    another object was found in its place (rewritten meanwhile)."""
    if turn.put_in_flight is not None:
        # A slow put outlasted the turn: it may still create or replace the object. Once it
        # ended, whatever is stored is known and deleted below; if it does not end in time,
        # the checkpoint counts as left (a later turn or clean-up deletes it).
        if not await await_put(turn.put_in_flight, wait=late_put_wait, run_id=run_id):
            return False
    elif turn.checkpoint_version is not None:
        return await delete_checkpoint(store, run_id, turn.checkpoint_version)
    stats = turn.checkpoint_stats
    if turn.put_in_flight is None and stats.puts == 0 and stats.failures == 0:
        return True  # the turn never wrote one
    # A put whose answer was lost may have landed: look, and delete what is there if it is a
    # checkpoint of this turn or an earlier one (stale now), at the version read.
    try:
        stored = await store.get(run_id)
    except StreamCheckpointError as exc:
        log.warning("run %s: could not look for the turn's checkpoint: %s", run_id, exc)
        return False
    if stored is None or stored.checkpoint.turn > turn_index:
        return True
    return await delete_checkpoint(store, run_id, stored.version)
