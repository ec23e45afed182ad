"""A checkpoint's fate: what to do with what is stored under a run's key (pure, no I/O).

Whoever reads a checkpoint to decide about it asks :func:`checkpoint_fate` with what the read
found (:data:`Found`) and who is asking (:data:`Judge`), and performs the answer through
:mod:`awaken_s3.streaming.cleanup`, the one place that reads to judge and deletes:

* the turn runner at the start of a turn (:class:`TurnStart`: it knows the turn it runs, from
  the committed history, but holds no run record), and after a commit as the next turn would;
* anyone holding the run record (:class:`RunRecord`): the run loop once the run ended (a
  redelivery, a failed or cancelled run, a final commit whose checkpoint was rewritten),
  ``awaken-s3 checkpoints list|clean`` and the sweeper;
* a worker that another epoch fenced, looking for the object it wrote itself
  (:class:`FencedWriter`).

| found                          | TurnStart           | RunRecord               | FencedWriter    |
|--------------------------------|---------------------|-------------------------|-----------------|
| nothing                        | Nothing             | Nothing                 | Nothing         |
| a checkpoint of a turn below   | Delete (stale)      | Delete (stale)          | Delete if it    |
| the one being run              |                     |                         | wrote it, else  |
|                                |                     |                         | Keep (all rows) |
| the turn being run             | Resume              | Resume (Delete past     |                 |
|                                |                     | max_age)                |                 |
| another thread's, a later turn | Replace (never      | Keep (Delete past       |                 |
|                                | replayed)           | max_age)                |                 |
| a run that ended or is missing | -                   | Delete                  |                 |
| a corrupt object               | Delete              | Delete                  | Keep            |
| a newer build's object         | LeaveNewer          | Delete once the run     | LeaveNewer      |
|                                |                     | ended, else LeaveNewer  |                 |
| a failed read                  | Keep                | Keep                    | Keep            |

Every Delete names the version judged; one without a version (a corrupt object whose store
could not tell it) is never performed, since a delete is never unconditional. The stale rule,
"a checkpoint whose turn is already committed is stale: deleted, never replayed", is written
once, in :func:`committed_reason`; :func:`match_turn` (which the turn machine asks before it
replays anything) and :func:`stale_reason` (the run record's view) build on it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.threads.models import RunState

CORRUPT: Final = "corrupt: not a readable checkpoint"

# -- what a read found --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Absent:
    """No object under the run's key."""


@dataclass(frozen=True, slots=True)
class Corrupt:
    """An object that is not this run's checkpoint (``CheckpointCorrupt``)."""

    #: the version judged (None: the store could not tell it)
    version: str | None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class NewerSchema:
    """An object a newer build wrote (``CheckpointSchemaUnsupported``)."""

    version: str | None
    schema_version: int


@dataclass(frozen=True, slots=True)
class Unreadable:
    """The read itself failed (an outage, access denied)."""

    error: StreamCheckpointError


#: what one read of a run's checkpoint found
Found = StoredCheckpoint | Absent | Corrupt | NewerSchema | Unreadable


def version_of(found: Found) -> str | None:
    if isinstance(found, StoredCheckpoint | Corrupt | NewerSchema):
        return found.version
    return None


# -- the stale rule -----------------------------------------------------------------------


def committed_reason(checkpoint: StreamCheckpoint, turn: int) -> str | None:
    """Why ``checkpoint`` is stale for a reader at ``turn`` (the model turns its committed
    history holds), or None: its turn is already committed, so it is never replayed."""
    if checkpoint.turn < turn:
        return f"turn {checkpoint.turn} is already committed (the run is at turn {turn})"
    return None


class Match(enum.Enum):
    """How a stored checkpoint relates to the turn a reader is about to run."""

    #: the turn being run: a resume may continue from it
    THIS_TURN = "this turn"
    #: a turn already committed: stale
    COMMITTED = "committed"
    #: written for another thread (a conversation it is not)
    OTHER_THREAD = "other thread"
    #: a later turn than the reader's history holds (a table restored to an earlier point,
    #: or a reader behind a newer owner, whose epoch check then decides)
    AHEAD = "ahead"


def match_turn(checkpoint: StreamCheckpoint, *, turn: int, thread_id: str) -> Match:
    if committed_reason(checkpoint, turn) is not None:
        return Match.COMMITTED
    if checkpoint.thread_id != thread_id:
        return Match.OTHER_THREAD
    if checkpoint.turn > turn:
        return Match.AHEAD
    return Match.THIS_TURN


def stale_reason(
    checkpoint: StreamCheckpoint | None,
    run: RunState | None,
    *,
    now: datetime | None = None,
    max_age: timedelta | None = None,
) -> str | None:
    """Why the checkpoint can go, judged against the run record, or None while the run may
    still resume from it.

    ``checkpoint`` is None for an object that cannot be decoded; ``run`` is None when the run
    does not exist. ``max_age`` (with ``now``) also retires checkpoints of live runs that
    nobody has touched for that long (their runs restart the turn).
    """
    if checkpoint is None:
        return CORRUPT
    if run is None:
        return "its run does not exist"
    if not run.status.runnable:
        return f"its run is {run.status.value}"
    committed = committed_reason(checkpoint, run.turn)
    if committed is not None:
        return committed
    if max_age is not None and now is not None and now - checkpoint.updated_at > max_age:
        return f"untouched since {checkpoint.updated_at.isoformat(timespec='seconds')}"
    return None


# -- who asks -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnStart:
    """The turn runner about to run ``turn`` of ``thread_id`` (no run record in hand)."""

    turn: int
    thread_id: str


@dataclass(frozen=True, slots=True)
class RunRecord:
    """Someone holding the run record as read (None: the run does not exist)."""

    run: RunState | None
    now: datetime | None = None
    #: retire live runs' checkpoints untouched this long (operators only)
    max_age: timedelta | None = None


@dataclass(frozen=True, slots=True)
class FencedWriter:
    """A worker that another epoch fenced: it removes only an object it wrote itself."""

    writer: str
    epoch: int


Judge = TurnStart | RunRecord | FencedWriter

# -- the fates ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Nothing:
    """Nothing is stored: a turn starts fresh, a clean-up has nothing to do."""


@dataclass(frozen=True, slots=True)
class Resume:
    """The checkpoint of the turn being run: a resume continues from it."""

    stored: StoredCheckpoint


@dataclass(frozen=True, slots=True)
class Replace:
    """Not this turn's, never replayed: the turn's first conditional put replaces it."""

    stored: StoredCheckpoint
    reason: str


@dataclass(frozen=True, slots=True)
class Keep:
    """Leave it as it is (not this asker's to judge, or it could not be read)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Delete:
    """Stale: delete it conditionally on ``version`` (never without one)."""

    version: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class LeaveNewer:
    """A newer build wrote it: not this build's to read, replace or delete."""

    schema_version: int
    version: str | None


Fate = Nothing | Resume | Replace | Keep | Delete | LeaveNewer


def checkpoint_fate(found: Found, judge: Judge) -> Fate:
    """What ``judge`` does with ``found`` (the table in the module's docstring)."""
    match found:
        case Absent():
            return Nothing()
        case Unreadable(error=error):
            return Keep(f"could not be read: {error}")
        case Corrupt(version=version):
            if isinstance(judge, FencedWriter):
                return Keep("corrupt, so not provably this writer's")
            return Delete(version, CORRUPT)
        case NewerSchema(version=version, schema_version=schema):
            run = judge.run if isinstance(judge, RunRecord) else None
            if run is not None and not run.status.runnable:
                # The run is over: stale whatever build wrote it.
                return Delete(version, f"its run is {run.status.value}")
            return LeaveNewer(schema, version)
    return _fate_of_stored(found, judge)


def _fate_of_stored(stored: StoredCheckpoint, judge: Judge) -> Fate:
    checkpoint = stored.checkpoint
    if isinstance(judge, FencedWriter):
        if (checkpoint.writer, checkpoint.epoch) == (judge.writer, judge.epoch):
            return Delete(stored.version, "written by this fenced worker")
        return Keep("written by another worker")
    if isinstance(judge, TurnStart):
        match = match_turn(checkpoint, turn=judge.turn, thread_id=judge.thread_id)
        if match is Match.THIS_TURN:
            return Resume(stored)
        if match is Match.COMMITTED:
            return Delete(stored.version, committed_reason(checkpoint, judge.turn) or "")
        return Replace(stored, f"a checkpoint of {match.value} (turn {checkpoint.turn})")
    run = judge.run
    reason = stale_reason(checkpoint, run, now=judge.now, max_age=judge.max_age)
    if reason is not None:
        return Delete(stored.version, reason)
    assert run is not None  # a missing run is stale
    if match_turn(checkpoint, turn=run.turn, thread_id=run.thread_id) is Match.THIS_TURN:
        return Resume(stored)
    return Keep(f"turn {checkpoint.turn} of thread {checkpoint.thread_id}: not the run's turn")
