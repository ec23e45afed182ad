"""The stream checkpoint: a hint for one unfinished model turn.

The checkpoint is never a conversation store (DynamoDB's Thread commit is the
authority). It holds just enough to resume one turn: the partial text, the
partial tool calls, the complete reasoning and server-tool blocks, and the
fencing fields.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from awaken_s3.errors import CheckpointCorrupt, CheckpointSchemaUnsupported, CheckpointTooLarge
from awaken_s3.ids import InvalidIdError, RunId, ThreadId
from awaken_s3.messages import KeptBlock

SCHEMA_VERSION: Final = 1
# A marker that tells our objects apart from anything else under the prefix.
CHECKPOINT_FORMAT: Final = "awaken-s3/stream-checkpoint"
# A turn is bounded by the model's output limit (well under 1 MiB of text for
# current models); 8 MiB leaves room for JSON escaping and tool arguments
# while refusing runaway payloads before they reach S3.
DEFAULT_MAX_CHECKPOINT_BYTES: Final = 8 * 1024 * 1024


def _utcnow() -> datetime:
    return datetime.now(UTC)


class PartialToolCall(BaseModel):
    """One tool call as streamed so far.

    ``arguments`` is the raw JSON text accumulated from the deltas; it is only
    parsed when the turn is planned, never trusted before.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0)
    id: str = Field(max_length=256)
    name: str = Field(max_length=256)
    arguments: str = ""
    closed: bool = False


class StreamCheckpoint(BaseModel):
    """The persisted partial of one model turn of one run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEMA_VERSION
    run_id: RunId
    thread_id: ThreadId
    model: str = Field(max_length=512)
    turn: int = Field(ge=0)
    partial_text: str = ""
    tool_calls: tuple[PartialToolCall, ...] = ()
    retry_count: int = Field(default=0, ge=0)
    # Fencing fields: the run lease epoch and the writer's id make every body
    # unique, so two writers never produce the same bytes (and ETag).
    epoch: int = Field(default=0, ge=0)
    writer: str = Field(default="", max_length=256)
    updated_at: datetime = Field(default_factory=_utcnow)
    # Written by a clean deadline suspension: the resume that follows is not
    # an interruption and does not count against the retry budget.
    suspended: bool = False
    # Code of the last interruption, so an exhausted budget can name it.
    last_error: str | None = Field(default=None, max_length=256)
    # Complete, authenticated reasoning (signed thinking, redacted) and paired server-tool
    # blocks of the partial turn, in stream order: carried verbatim by R1-R3. Optional, so
    # checkpoints written before it existed still decode.
    reusable_blocks: tuple[KeptBlock, ...] = ()
    # The recovery plan this turn was last resumed with (None: it never was). For a live view
    # of the turn; recovery itself always plans from the content.
    resumed_with: Literal["R1", "R2", "R3", "R4"] | None = None

    @field_validator("schema_version")
    @classmethod
    def _known_schema(cls, value: int) -> int:
        if value != SCHEMA_VERSION:
            raise ValueError(
                f"unsupported checkpoint schema_version {value}; this build reads {SCHEMA_VERSION}"
            )
        return value

    @field_validator("tool_calls")
    @classmethod
    def _unique_indices(cls, value: tuple[PartialToolCall, ...]) -> tuple[PartialToolCall, ...]:
        indices = [call.index for call in value]
        if len(indices) != len(set(indices)):
            raise ValueError("tool call indices must be unique")
        return value


class StoredCheckpoint(BaseModel):
    """A checkpoint as read back, with the backend's version token (S3 ETag)."""

    model_config = ConfigDict(frozen=True)

    checkpoint: StreamCheckpoint
    version: str


#: the last checkpoint encoded and its body: a put encodes its snapshot, and the writer then
#: counts the same object's bytes, so the second call costs nothing (a checkpoint is frozen,
#: so the same object always has the same body; a copy is another object)
_last_encoded: tuple[StreamCheckpoint, bytes] | None = None


def encode_checkpoint(
    checkpoint: StreamCheckpoint, *, max_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES
) -> bytes:
    """Serialize a checkpoint, refusing bodies over ``max_bytes``."""
    global _last_encoded
    last = _last_encoded
    if last is not None and last[0] is checkpoint:
        body = last[1]
    else:
        payload: dict[str, Any] = {"format": CHECKPOINT_FORMAT}
        # Optional fields are left out when empty: such a body is the one that builds without
        # those fields read and write.
        exclude = {
            name for name in ("reusable_blocks", "resumed_with") if not getattr(checkpoint, name)
        }
        payload.update(checkpoint.model_dump(mode="json", exclude=exclude or None))
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        _last_encoded = (checkpoint, body)
    if len(body) > max_bytes:
        raise CheckpointTooLarge(
            f"checkpoint for run {checkpoint.run_id} is {len(body)} bytes; "
            f"the limit is {max_bytes}",
            run_id=checkpoint.run_id,
        )
    return body


def decode_checkpoint(
    body: bytes,
    *,
    run_id: str,
    max_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES,
    version: str | None = None,
) -> StreamCheckpoint:
    """Parse a stored body; anything that is not our checkpoint for ``run_id`` is corrupt.

    ``version`` is the stored object's version token; it rides on the error raised, so the
    caller can delete (or keep) exactly the object that was judged. A checkpoint of this run
    written by a newer build raises :class:`CheckpointSchemaUnsupported`, not corruption.
    """

    def corrupt(message: str) -> CheckpointCorrupt:
        return CheckpointCorrupt(message, run_id=run_id, version=version)

    if len(body) > max_bytes:
        raise corrupt(
            f"stored checkpoint for run {run_id} is {len(body)} bytes, over the {max_bytes} limit"
        )
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise corrupt(f"stored checkpoint for run {run_id} is not UTF-8 JSON") from exc
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise corrupt(f"object for run {run_id} is not an awaken-s3 stream checkpoint")
    payload.pop("format")
    newer = newer_schema_version(payload)
    if newer is not None and payload.get("run_id") == run_id:
        raise CheckpointSchemaUnsupported(
            f"checkpoint for run {run_id} has schema_version {newer}; this build reads "
            f"{SCHEMA_VERSION}",
            run_id=run_id,
            version=version,
            schema_version=newer,
        )
    try:
        checkpoint = StreamCheckpoint.model_validate(payload)
    except (ValidationError, InvalidIdError) as exc:
        raise corrupt(f"stored checkpoint for run {run_id} is invalid: {exc}") from exc
    if checkpoint.run_id != run_id:
        raise corrupt(f"object under run {run_id} belongs to run {checkpoint.run_id}")
    return checkpoint


def newer_schema_version(payload: dict[str, Any]) -> int | None:
    """The payload's ``schema_version`` when it is a later one than this build reads."""
    value = payload.get("schema_version")
    # bool is an int subclass; ``true`` is no schema version.
    if isinstance(value, int) and not isinstance(value, bool) and value > SCHEMA_VERSION:
        return value
    return None
