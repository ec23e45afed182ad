"""The live view of a run's unfinished turn, read from its stream checkpoint.

The checkpoint is a hint for resuming a turn, and also the best picture of the turn while it
streams: the API shows it to the run's caller (``GET /runs/{id}`` and ``GET /runs/{id}/partial``,
docs/HANDLERS.md). Everything here but :func:`read_partial` is pure: which checkpoint counts
as the run's live partial, the text after a caller's offset, the view's version (ETag) and
the ``If-None-Match`` decision.

Offsets count Unicode code points of the turn's text (Python string indices) and belong to
one turn: a new turn's text starts again at 0.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Final

from awaken_s3.errors import (
    AwakenError,
    CheckpointCorrupt,
    CheckpointSchemaUnsupported,
    StreamCheckpointError,
)
from awaken_s3.models import PartialToolCall, StoredCheckpoint
from awaken_s3.service.public_errors import public_error
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.threads.models import RunState

log = logging.getLogger("awaken_s3.partial")

#: the largest offset a caller may send; a turn's text is far shorter (it fits a checkpoint)
MAX_OFFSET: Final = 2**31 - 1


class InvalidQuery(AwakenError, ValueError):
    """A query parameter that is not what the route accepts (the API answers 400)."""


def parse_offset(raw: str | None, *, name: str) -> int | None:
    """A non-negative whole number from a query parameter, or None when it is absent."""
    if raw is None or raw == "":
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > len(str(MAX_OFFSET)):
        raise InvalidQuery(f"{name} must be a whole number from 0 to {MAX_OFFSET}")
    value = int(raw)
    if value > MAX_OFFSET:
        raise InvalidQuery(f"{name} must be a whole number from 0 to {MAX_OFFSET}")
    return value


def live_partial(run: RunState, stored: StoredCheckpoint | None) -> StoredCheckpoint | None:
    """``stored`` when it is the run's unfinished turn, else None.

    A checkpoint of an earlier turn is a leftover whose turn is already committed (the thread
    shows it), and an ended run has no unfinished turn: neither is shown as a partial.
    """
    if stored is None or run.status.terminal:
        return None
    checkpoint = stored.checkpoint
    if checkpoint.turn != run.turn or checkpoint.thread_id != run.thread_id:
        return None
    return stored


def text_offset(length: int, *, after: int | None, same_turn: bool) -> int:
    """Where the returned text starts: ``after`` when it lies within this turn's text, else 0
    (a caller that holds text of another turn, or more text than there is, gets it all)."""
    if after is None or not same_turn or after > length:
        return 0
    return after


def bare_version(version: str) -> str:
    """An S3 ETag without its quotes (the body's form; headers carry the quoted one)."""
    return version.strip('"')


def tool_call_view(call: PartialToolCall) -> dict[str, Any]:
    return {
        "index": call.index,
        "id": call.id,
        "name": call.name,
        # The raw JSON text streamed so far: complete and parseable only once closed.
        "arguments": call.arguments,
        "complete": call.closed,
    }


def partial_view(
    stored: StoredCheckpoint, *, after: int | None = None, turn: int | None = None
) -> dict[str, Any]:
    """What a caller sees of a live partial turn; ``after`` (with the caller's ``turn``) skips
    the text it already has."""
    checkpoint = stored.checkpoint
    text = checkpoint.partial_text
    offset = text_offset(len(text), after=after, same_turn=turn is None or turn == checkpoint.turn)
    return {
        "turn": checkpoint.turn,
        "offset": offset,
        "text": text[offset:],
        "text_length": len(text),
        "tool_calls": [tool_call_view(call) for call in checkpoint.tool_calls],
        "resumed_with": checkpoint.resumed_with,
        "version": bare_version(stored.version),
        "updated_at": checkpoint.updated_at.isoformat(),
    }


def view_etag(run: RunState, stored: StoredCheckpoint | None) -> str:
    """The version of ``GET /runs/{id}/partial``: it changes whenever the partial (a new
    checkpoint version) or the run's progress (status, turn, committed messages) does."""
    basis = "|".join(
        (
            run.status.value,
            str(run.turn),
            str(run.message_count),
            stored.version if stored is not None else "-",
        )
    )
    return '"' + hashlib.sha256(basis.encode("utf-8")).hexdigest()[:32] + '"'


def _opaque(tag: str) -> str:
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag`` (weak comparison, RFC 9110 13.1.2)."""
    if if_none_match is None or not if_none_match.strip():
        return False
    if if_none_match.strip() == "*":
        return True
    wanted = _opaque(etag)
    return any(_opaque(tag) == wanted for tag in if_none_match.split(","))


def partial_response(
    public_run_id: str,
    run: RunState,
    stored: StoredCheckpoint | None,
    *,
    after: int | None = None,
    turn: int | None = None,
) -> dict[str, Any]:
    """The body of ``GET /runs/{id}/partial``: a poller learns why a run failed from the
    answer that tells it the run ended (the public code and text, as ``GET /runs/{id}``)."""
    return {
        "run_id": public_run_id,
        "status": run.status.value,
        "turn": run.turn,
        "message_count": run.message_count,
        "error": public_error(run.error) if run.error else None,
        "partial": partial_view(stored, after=after, turn=turn) if stored is not None else None,
    }


@dataclass(frozen=True, slots=True)
class PartialRead:
    #: the run's live partial, if it has one
    stored: StoredCheckpoint | None
    #: the checkpoint could not be read (S3 failed): absence is not known
    unavailable: bool = False


async def read_partial(store: StreamCheckpointStore, run: RunState) -> PartialRead:
    """The run's live partial. A corrupt checkpoint or one a newer build wrote shows no
    partial (the worker deals with both); a failed read says so instead of guessing."""
    try:
        stored = await store.get(run.run_id)
    except (CheckpointCorrupt, CheckpointSchemaUnsupported) as exc:
        log.warning("run %s: checkpoint not shown: %s", run.run_id, type(exc).__name__)
        return PartialRead(None)
    except StreamCheckpointError as exc:
        log.warning("run %s: checkpoint could not be read: %s", run.run_id, exc)
        return PartialRead(None, unavailable=True)
    return PartialRead(live_partial(run, stored))
