"""A cancel's signal to the worker streaming the run: its checkpoint, re-put with a mark.

The worker learns of a cancel from the run record, which it reads at its lease renewals (a
third of the lease apart on the template's defaults) and whenever its checkpoint writer loses
a condition. The second is what makes a cancel stop the tokens within about one put interval:
the API, once the cancel landed, changes the checkpoint's version, so the worker's next
coalesced conditional put is refused, its writer re-reads, finds the mark and asks the run
record, and the run loop abandons the turn at once (:meth:`RunLease.confirm
<awaken_s3.runtime.lease.RunLease.confirm>` finding the run cancelled stops the work in flight
as a renewal finding it does).

The mark loses nothing: the body put again is the one read, at the version read (same turn,
text, tool calls, epoch), with only ``writer`` changed to :data:`CANCEL_WRITER` so the bytes
(and the ETag) differ. Both puts are conditional, so of the API's put and the worker's put at
the same version exactly one lands: when the worker's lands first, the API reads its newer
body and marks that (at most :data:`MAX_MARK_ATTEMPTS` times: each try after a lost one reads
the version the worker just wrote, and wins when its read and put fit before the worker's
next put, which comes a put interval after the last one started); when the API's lands first,
the worker's is refused and the worker stops. Where no checkpoint exists yet (a fresh turn
before its first put) the mark is created empty, so the worker's first put (a create) is
refused the same way. Whatever the mark leaves behind belongs to a cancelled run, so it is
stale by :func:`~awaken_s3.streaming.fate.checkpoint_fate`'s rule: the worker's settle after
the cancel, a redelivery, or the sweeper's leftover clean deletes it at its version.

A mark that cannot be made (S3 unreachable, a corrupt or newer-build object) changes
nothing: the renewal still stops the worker, only later.
"""

from __future__ import annotations

import enum
import logging
from typing import Final

from awaken_s3.errors import CheckpointFenced, StreamCheckpointError
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.cleanup import read_checkpoint
from awaken_s3.streaming.fate import Absent, Found
from awaken_s3.streaming.fence import CANCEL_WRITER, is_cancel_mark
from awaken_s3.threads.models import RunState

log = logging.getLogger("awaken_s3.checkpoint")

#: reads and conditional puts the API tries before it leaves the signal to the renewal
MAX_MARK_ATTEMPTS: Final = 8


class Mark(enum.Enum):
    """What :func:`mark_cancelled` did."""

    #: the checkpoint now carries the mark at a new version
    MARKED = "marked"
    #: already marked (a repeated cancel): its version changed when it was marked
    ALREADY = "already"
    #: nothing marked (unreadable, corrupt, a newer build's, a store error, or the worker's
    #: puts won every race): the renewal stops the worker
    NOT_MARKED = "not_marked"


def _marked_body(run: RunState, found: Found) -> tuple[StreamCheckpoint, str | None] | None:
    """The body to put and the version to put it at; None: nothing to mark."""
    if isinstance(found, StoredCheckpoint):
        return found.checkpoint.model_copy(update={"writer": CANCEL_WRITER}), found.version
    if isinstance(found, Absent):
        empty = StreamCheckpoint(
            run_id=run.run_id,
            thread_id=run.thread_id,
            model=run.settings.model,
            turn=run.turn,
            epoch=run.lease.epoch,
            writer=CANCEL_WRITER,
        )
        return empty, None
    return None


async def mark_cancelled(store: StreamCheckpointStore, run: RunState) -> Mark:
    """Change the version of the cancelled ``run``'s checkpoint (see the module)."""
    for _ in range(MAX_MARK_ATTEMPTS):
        found = await read_checkpoint(store, run.run_id)
        if is_cancel_mark(found):
            return Mark.ALREADY
        planned = _marked_body(run, found)
        if planned is None:
            log.info("run %s: the checkpoint cannot carry a cancel mark: %s", run.run_id, found)
            return Mark.NOT_MARKED
        body, version = planned
        try:
            await store.put(body, expected_version=version)
        except CheckpointFenced:
            continue  # the worker's put landed first: mark its newer body
        except StreamCheckpointError as exc:
            log.warning("run %s: the cancel mark was not put: %s", run.run_id, exc)
            return Mark.NOT_MARKED
        return Mark.MARKED
    log.info("run %s: the worker's puts won every race with the cancel mark", run.run_id)
    return Mark.NOT_MARKED
