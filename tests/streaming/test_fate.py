"""A checkpoint's fate as a table: what was found, who asks -> what becomes of it (no I/O).

Every reader that decides about a stored checkpoint (the turn runner, the run loop, a fenced
worker, ``awaken-s3 checkpoints`` and the sweeper) asks this one function, so each row here is
a rule all of them follow.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.streaming.fate import (
    CORRUPT,
    Absent,
    Corrupt,
    Delete,
    Fate,
    FencedWriter,
    Found,
    Judge,
    Keep,
    LeaveNewer,
    Match,
    NewerSchema,
    Nothing,
    Replace,
    Resume,
    RunRecord,
    TurnStart,
    Unreadable,
    checkpoint_fate,
    match_turn,
    stale_reason,
)
from awaken_s3.threads.models import RunState, RunStatus
from tests.fixtures.runs import run_state

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def stored(
    *, turn: int = 2, thread: str = "t1", epoch: int = 3, writer: str = "w"
) -> StoredCheckpoint:
    checkpoint = StreamCheckpoint(
        run_id="r1",
        thread_id=thread,
        model="m",
        turn=turn,
        partial_text="partial",
        epoch=epoch,
        writer=writer,
        updated_at=NOW - timedelta(hours=30),
    )
    return StoredCheckpoint(checkpoint=checkpoint, version="v7")


def run(status: RunStatus = RunStatus.RUNNING, turn: int = 2) -> RunState:
    return run_state(status=status, turn=turn)


AT_TURN_2 = TurnStart(2, "t1")
LIVE = RunRecord(run())
OLD_AGE = RunRecord(run(), now=NOW, max_age=timedelta(hours=24))
FENCED = FencedWriter("w", 3)
DOWN = Unreadable(StreamCheckpointError("S3 unreachable"))

#: (what was found, who asks) -> the fate, or its type when its reason is prose
ROWS: dict[str, tuple[Found, Judge, Fate | type]] = {
    # -- the turn runner at the start of turn 2
    "nothing stored: the turn starts fresh": (Absent(), AT_TURN_2, Nothing()),
    "this turn's checkpoint is resumed": (stored(), AT_TURN_2, Resume(stored())),
    "a committed turn's checkpoint is stale: deleted at its version": (
        stored(turn=1),
        AT_TURN_2,
        Delete("v7", "turn 1 is already committed (the run is at turn 2)"),
    ),
    "a later turn's is never replayed, only replaced (the epoch check decides first)": (
        stored(turn=3),
        AT_TURN_2,
        Replace,
    ),
    "another thread's is never replayed, only replaced": (
        stored(thread="t9"),
        AT_TURN_2,
        Replace,
    ),
    "a corrupt object is deleted at the version judged": (
        Corrupt("v1", "not json"),
        AT_TURN_2,
        Delete("v1", CORRUPT),
    ),
    "a corrupt object without a version gets a delete that is never sent": (
        Corrupt(None, "not json"),
        AT_TURN_2,
        Delete(None, CORRUPT),
    ),
    "a newer build's object is left alone while the run goes on": (
        NewerSchema("v1", 9),
        AT_TURN_2,
        LeaveNewer(9, "v1"),
    ),
    "a failed read keeps whatever is there": (DOWN, AT_TURN_2, Keep),
    # -- someone holding the run record: the loop, `checkpoints list|clean`, the sweeper
    "a live run's checkpoint of its turn is one it may resume from": (
        stored(),
        LIVE,
        Resume(stored()),
    ),
    "a live run's checkpoint of a committed turn is stale": (stored(turn=0), LIVE, Delete),
    "a live run's checkpoint ahead of it is kept (a restore; its worker replaces it)": (
        stored(turn=5),
        LIVE,
        Keep,
    ),
    "age retires a live run's checkpoint only when asked": (
        stored(),
        OLD_AGE,
        Delete("v7", "untouched since 2026-11-29T06:00:00+00:00"),
    ),
    "an ended run's checkpoint is stale": (
        stored(),
        RunRecord(run(RunStatus.COMPLETED)),
        Delete("v7", "its run is completed"),
    ),
    "a missing run's checkpoint is stale": (
        stored(),
        RunRecord(None),
        Delete("v7", "its run does not exist"),
    ),
    "a corrupt object is stale whatever the run": (Corrupt("v1"), LIVE, Delete("v1", CORRUPT)),
    "a newer build's object of a live run is left alone": (
        NewerSchema("v1", 9),
        LIVE,
        LeaveNewer(9, "v1"),
    ),
    "... and of a missing run (this build cannot judge it)": (
        NewerSchema("v1", 9),
        RunRecord(None),
        LeaveNewer(9, "v1"),
    ),
    "... but once the run ended it is stale whatever wrote it": (
        NewerSchema("v1", 9),
        RunRecord(run(RunStatus.CANCELLED)),
        Delete("v1", "its run is cancelled"),
    ),
    "an ended run with nothing stored has nothing to do": (
        Absent(),
        RunRecord(run(RunStatus.FAILED)),
        Nothing(),
    ),
    "an unreadable object of an ended run is kept (left for the sweeper)": (
        DOWN,
        RunRecord(run(RunStatus.FAILED)),
        Keep,
    ),
    # -- a worker another epoch fenced
    "a fenced worker deletes the object it wrote itself": (
        stored(),
        FENCED,
        Delete("v7", "written by this fenced worker"),
    ),
    "... never one of another epoch": (stored(epoch=4), FENCED, Keep),
    "... nor another writer's of its epoch": (stored(writer="x"), FENCED, Keep),
    "... nor a corrupt one it cannot prove its own": (Corrupt("v1"), FENCED, Keep),
    "... and leaves a newer build's alone": (NewerSchema("v1", 9), FENCED, LeaveNewer(9, "v1")),
}


@pytest.mark.parametrize("row", list(ROWS), ids=list(ROWS))
def test_fate_table(row: str) -> None:
    found, judge, expected = ROWS[row]
    fate = checkpoint_fate(found, judge)
    if isinstance(expected, type):
        assert isinstance(fate, expected), fate
    else:
        assert fate == expected


def test_every_delete_names_the_version_judged() -> None:
    for found, judge, _ in ROWS.values():
        fate = checkpoint_fate(found, judge)
        if isinstance(fate, Delete) and not isinstance(found, Corrupt):
            assert fate.version == getattr(found, "version", None)


def test_the_stale_rule_is_the_committed_turn() -> None:
    checkpoint = stored(turn=1).checkpoint
    assert match_turn(checkpoint, turn=2, thread_id="t1") is Match.COMMITTED
    assert match_turn(checkpoint, turn=1, thread_id="t1") is Match.THIS_TURN
    assert match_turn(checkpoint, turn=0, thread_id="t1") is Match.AHEAD
    assert match_turn(checkpoint, turn=1, thread_id="t2") is Match.OTHER_THREAD
    # A committed turn is stale whichever thread wrote it.
    assert match_turn(checkpoint, turn=2, thread_id="t2") is Match.COMMITTED
    assert "already committed" in (stale_reason(checkpoint, run(turn=2)) or "")
    assert stale_reason(checkpoint, run(turn=1)) is None
