"""Explaining a lost checkpoint condition, as a table (no I/O).

Each row: what the writer's re-read found, whether its own version is uncertain, whether a
run record can be asked and what it answers -> adopt, create, ask, repair or fenced. The
writer (tests/streaming/test_coalescer.py, test_runner.py) performs these verdicts; here they
are pinned one by one.
"""

from __future__ import annotations

import pytest

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.streaming.fate import Absent, Corrupt, Found, NewerSchema, Unreadable
from awaken_s3.streaming.fence import (
    CANCEL_WRITER,
    Adopt,
    AskOwner,
    Create,
    Fenced,
    FenceVerdict,
    Repair,
    explain_fence,
)

OURS = 5


def at_epoch(epoch: int) -> StoredCheckpoint:
    checkpoint = StreamCheckpoint(
        run_id="r1", thread_id="t1", model="m", turn=0, epoch=epoch, writer="someone"
    )
    return StoredCheckpoint(checkpoint=checkpoint, version=f"v{epoch}")


DOWN = Unreadable(StreamCheckpointError("S3 unreachable"))


def marked(epoch: int) -> StoredCheckpoint:
    """A body the API put again for a cancel: the worker's, with the cancel's writer."""
    stored = at_epoch(epoch)
    checkpoint = stored.checkpoint.model_copy(update={"writer": CANCEL_WRITER})
    return StoredCheckpoint(checkpoint=checkpoint, version=f"m{epoch}")


#: (seen, uncertain, can ask, the owner's answer) -> verdict
ROWS: dict[str, tuple[Found, bool, bool, bool | None, FenceVerdict]] = {
    "an older epoch wrote after we loaded: adopt its version": (
        at_epoch(4),
        False,
        True,
        None,
        Adopt("v4"),
    ),
    "our own epoch's while our version is uncertain: our own landed put": (
        at_epoch(OURS),
        True,
        True,
        None,
        Adopt("v5"),
    ),
    "our own epoch's with a known version: only the run record can tell": (
        at_epoch(OURS),
        False,
        True,
        None,
        AskOwner(),
    ),
    "a newer epoch's: ask the run record": (at_epoch(6), False, True, None, AskOwner()),
    "... which says we still hold the run: the object is wrong, replace it": (
        at_epoch(6),
        False,
        True,
        True,
        Repair("v6"),
    ),
    "... which says someone else does: fenced": (at_epoch(6), False, True, False, Fenced()),
    "a newer epoch's and no run record to ask: fenced": (at_epoch(6), True, False, None, Fenced()),
    "gone while uncertain, no run record: create it": (Absent(), True, False, None, Create()),
    "gone while uncertain: ask first (a zombie's create would outlive the run)": (
        Absent(),
        True,
        True,
        None,
        AskOwner(),
    ),
    "... ours: create": (Absent(), True, True, True, Create()),
    "... not ours: fenced": (Absent(), True, True, False, Fenced()),
    "gone with a known version (deleted under us): ask": (Absent(), False, True, None, AskOwner()),
    "... ours: repair by creating": (Absent(), False, True, True, Repair(None)),
    "... with no run record: fenced": (Absent(), False, False, None, Fenced()),
    "a failed re-read while uncertain: create if ours": (DOWN, True, True, True, Create()),
    "a failed re-read with a known version: fenced": (DOWN, False, True, None, Fenced()),
    "a corrupt body: ask": (Corrupt("vc"), False, True, None, AskOwner()),
    "... ours: replace it at the version judged": (Corrupt("vc"), True, True, True, Repair("vc")),
    "... someone else's: fenced": (Corrupt("vc"), False, True, False, Fenced()),
    "the cancel's mark at our epoch, our version uncertain: never adopted, ask": (
        marked(OURS),
        True,
        True,
        None,
        AskOwner(),
    ),
    "the cancel's mark on an older epoch's body: ask too": (
        marked(4),
        False,
        True,
        None,
        AskOwner(),
    ),
    "... the run record says the run is over (cancelled): fenced": (
        marked(OURS),
        True,
        True,
        False,
        Fenced(),
    ),
    "... no run record to ask: fenced": (marked(OURS), True, False, None, Fenced()),
    "a newer build's object is as unreadable to this one": (
        NewerSchema("vn", 9),
        False,
        True,
        None,
        Fenced(),
    ),
}


@pytest.mark.parametrize("row", list(ROWS), ids=list(ROWS))
def test_fence_table(row: str) -> None:
    seen, uncertain, can_ask, owner, expected = ROWS[row]
    verdict = explain_fence(seen, epoch=OURS, uncertain=uncertain, can_ask=can_ask, owner=owner)
    assert verdict == expected


def test_the_run_record_is_asked_at_most_once_per_explanation() -> None:
    # Whatever was seen, an answer from the run record settles it: never AskOwner again.
    for seen, uncertain, can_ask, _, _ in ROWS.values():
        for answer in (True, False):
            verdict = explain_fence(
                seen, epoch=OURS, uncertain=uncertain, can_ask=can_ask, owner=answer
            )
            assert not isinstance(verdict, AskOwner)
