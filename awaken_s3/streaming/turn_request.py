"""What one :meth:`~awaken_s3.streaming.runner.TurnRunner.run_turn` call is asked to do."""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from awaken_s3.ids import validate_run_id, validate_thread_id
from awaken_s3.models import StoredCheckpoint
from awaken_s3.streaming.provider import ModelRequest, Provider


class _NotLoaded(enum.Enum):
    NOT_LOADED = "NOT_LOADED"


#: ``existing=NOT_LOADED``: the runner loads the checkpoint itself
NOT_LOADED: Final = _NotLoaded.NOT_LOADED

#: asks the run record whether the caller's epoch still holds the lease
OwnerCheck = Callable[[], Awaitable[bool]]

log = logging.getLogger("awaken_s3.streaming")


async def ask_owner(confirm: OwnerCheck | None, run_id: str) -> bool:
    """The run record's answer; no record to ask, or one that cannot be read, is a no: an
    unreadable run record proves nothing, so a fence is believed."""
    if confirm is None:
        return False
    try:
        return await confirm()
    except Exception as exc:
        log.warning("run %s: could not confirm the lease: %s", run_id, exc)
        return False


@dataclass(frozen=True, slots=True)
class TurnRequest:
    run_id: str
    thread_id: str
    #: the turn's index in the run (= model turns committed before it)
    turn: int
    #: the lease epoch the caller holds; written into every checkpoint
    epoch: int
    #: the committed history and the model settings (never a continuation prefix)
    request: ModelRequest
    #: a ``time.monotonic()`` instant by which the turn must suspend
    deadline: float | None = None
    #: the checkpoint the caller already loaded (None: there is none), or NOT_LOADED
    existing: StoredCheckpoint | _NotLoaded | None = NOT_LOADED
    #: the run record's word on a checkpoint-layer fence (a lost condition the stored object
    #: does not explain, a checkpoint from a newer epoch): True means the caller still holds
    #: the lease, so the checkpoint is what is wrong and is replaced. Without it every such
    #: fence is believed.
    confirm_owner: OwnerCheck | None = None
    #: the provider this turn streams from (an agent's own); None: the runner's
    provider: Provider | None = None
    #: False: no run lease stands behind ``epoch`` (a caller without a run record). The turn
    #: then writes under the epoch above the checkpoint it finds, so a resumed writer fences
    #: the one before it by the store alone (its conditional put, the writer id in the body);
    #: with True, a checkpoint from a newer epoch is a newer owner's (see ``confirm_owner``).
    leased: bool = True

    def __post_init__(self) -> None:
        validate_run_id(self.run_id)
        validate_thread_id(self.thread_id)
        if self.turn < 0 or self.epoch < 0:
            raise ValueError("turn and epoch must be >= 0")
        existing = self.existing
        if isinstance(existing, StoredCheckpoint) and existing.checkpoint.run_id != self.run_id:
            raise ValueError("the existing checkpoint belongs to another run")
