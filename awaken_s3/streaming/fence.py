"""Why a conditional checkpoint put lost, and what its writer does about it (pure, no I/O).

A lost condition (412, or 404 on a key gone) says only that the stored object is not the
version the writer expected. The writer re-reads the object and asks :func:`explain_fence`
with what the re-read found, its lease epoch, whether its own version is uncertain (a put
that failed ambiguously and may have landed, a failed load, a stale checkpoint it replaces),
and, when the verdict is :class:`AskOwner`, the run record's answer ("does this epoch still
hold the lease?"):

| re-read found                   | our version | run record says ours | verdict          |
|---------------------------------|-------------|----------------------|------------------|
| a checkpoint of an older epoch  | any         | (not asked)          | Adopt its version|
| our own epoch's checkpoint      | uncertain   | (not asked)          | Adopt its version|
| our own epoch's, version known; | any         | yes                  | Repair           |
| a newer epoch's                 |             | no, or cannot ask    | Fenced           |
| nothing, or a failed read       | uncertain   | yes, or cannot ask   | Create           |
|                                 |             | no                   | Fenced           |
| nothing                         | known       | yes                  | Repair (create)  |
| a corrupt object                | any         | yes                  | Repair           |
| a failed read                   | known       | (not asked)          | Fenced           |
| a newer build's object          | as a failed read                                      |
| the API's cancel mark           | any         | yes                  | Repair           |
|                                 |             | no, or cannot ask    | Fenced           |

One lease epoch has one holder, so a checkpoint of our own epoch is our own write. A fence
that no newer owner explains (an object deleted under its writer, an epoch the run never had
after a table restore, a leftover a create collides with) is repaired only on the run
record's word: an unreadable run record proves nothing, and a fence is then believed.
Creating where an object is gone also asks the run record when one can be asked, since a
zombie's create after the run ended would leave an object nobody ever deletes.

The cancel mark (``writer`` = :data:`CANCEL_WRITER`, put by the API after a cancel landed, at
the epoch of the body it marked: :mod:`awaken_s3.streaming.cancel_mark`) is never adopted as
one's own write, whatever its epoch: it exists to send the writer to the run record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeGuard

from awaken_s3.models import StoredCheckpoint
from awaken_s3.streaming.fate import Absent, Corrupt, Found

#: the ``writer`` of a checkpoint the API marked for a cancel (a worker's id is its log
#: stream, request id and a random suffix, never this)
CANCEL_WRITER: Final = "awaken-s3:cancel"


@dataclass(frozen=True, slots=True)
class Adopt:
    """Take the stored version and put again (an older epoch's write, or our own)."""

    version: str


@dataclass(frozen=True, slots=True)
class Create:
    """Put with no version: the object is gone and we never knew its version for sure."""


@dataclass(frozen=True, slots=True)
class AskOwner:
    """Only the run record can tell: ask it, then explain again with its answer."""


@dataclass(frozen=True, slots=True)
class Repair:
    """The run record says we hold the run: replace whatever is stored (None: create)."""

    version: str | None


@dataclass(frozen=True, slots=True)
class Fenced:
    """Another writer owns the checkpoint: stop writing."""


FenceVerdict = Adopt | Create | AskOwner | Repair | Fenced


def is_cancel_mark(seen: Found) -> TypeGuard[StoredCheckpoint]:
    """What a read found is the API's cancel mark."""
    return isinstance(seen, StoredCheckpoint) and seen.checkpoint.writer == CANCEL_WRITER


def explain_fence(
    seen: Found,
    *,
    epoch: int,
    uncertain: bool,
    can_ask: bool,
    owner: bool | None = None,
) -> FenceVerdict:
    """The verdict on a lost condition (the table in the module's docstring).

    ``can_ask``: a run record stands behind ``epoch``; ``owner``: its answer, None until it
    was asked.
    """
    if is_cancel_mark(seen):
        return _owner_decides(Repair(seen.version), can_ask=can_ask, owner=owner)
    if isinstance(seen, StoredCheckpoint):
        theirs = seen.checkpoint.epoch
        if theirs < epoch or (theirs == epoch and uncertain):
            return Adopt(seen.version)
        return _owner_decides(Repair(seen.version), can_ask=can_ask, owner=owner)
    if isinstance(seen, Corrupt):
        return _owner_decides(Repair(seen.version), can_ask=can_ask, owner=owner)
    if uncertain:
        # Gone (or unreadable) and never known for sure: ours to create, unless the run
        # record says we are a zombie.
        return _owner_decides(Create(), can_ask=can_ask, owner=owner) if can_ask else Create()
    if isinstance(seen, Absent):
        return _owner_decides(Repair(None), can_ask=can_ask, owner=owner)
    return Fenced()


def _owner_decides(yes: FenceVerdict, *, can_ask: bool, owner: bool | None) -> FenceVerdict:
    if not can_ask or owner is False:
        return Fenced()
    if owner is None:
        return AskOwner()
    return yes
