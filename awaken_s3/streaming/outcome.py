"""What a turn runner hands back to the caller that commits the turn."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Literal

from awaken_s3.messages import Message


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens, each kind apart: ``input_tokens`` excludes the prompt tokens read from or
    written to the provider's cache, which are billed at other rates."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class DroppedToolCall:
    """An incomplete or malformed tool call that was never executed."""

    index: int
    id: str
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class ClassifiedError:
    """A failure as recorded on a failed run: a stable code, never a stack trace."""

    code: str
    message: str
    retryable: bool


@dataclass(frozen=True, slots=True)
class CheckpointStats:
    """Checkpoint I/O of one turn, for metrics: checkpoint faults are counted, never fatal."""

    puts: int = 0
    failures: int = 0
    fenced: int = 0
    #: encoded bytes of the successful puts
    bytes: int = 0
    #: a GET of the existing checkpoint that failed (outage) or returned a corrupt body
    load_failures: int = 0
    #: lost conditions the run record showed were not a newer owner: the stored object was
    #: wrong (deleted under the writer, from an impossible epoch, a leftover) and replaced
    repaired: int = 0
    #: a checkpoint a newer build wrote was found and left alone (the turn ran without
    #: checkpoints); it outlives the turn, so the caller cleans it up once the run has ended
    newer_schema: int = 0


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """The whole assistant turn, ready to commit.

    ``message`` is prefix + continuation + complete tool calls: never only the
    continuation. ``checkpoint_version`` is the last version this runner wrote
    (or loaded), for the conditional delete that follows the commit.
    ``put_in_flight`` is a checkpoint put that outlasted the writer's final wait (a slow
    S3): until it ends, what is stored is unknown, so the delete after the commit awaits it
    and then deletes whatever it finds of this turn, at the version read.
    """

    message: Message
    stop_reason: str
    usage: Usage
    plan_kind: Literal["R1", "R2", "R3", "R4"] | None
    dropped_tool_calls: tuple[DroppedToolCall, ...] = ()
    checkpoint_version: str | None = None
    retry_count: int = 0
    checkpoint_stats: CheckpointStats = CheckpointStats()
    put_in_flight: Awaitable[None] | None = field(default=None, compare=False, repr=False)
    kind: Literal["completed"] = field(default="completed", init=False)


@dataclass(frozen=True, slots=True)
class TurnSuspended:
    """The deadline came first; the checkpoint was flushed for a later resume."""

    checkpoint_version: str | None
    retry_count: int
    checkpoint_stats: CheckpointStats = CheckpointStats()
    #: characters of text and tool arguments this call received (0: it made no progress)
    new_chars: int = 0
    kind: Literal["suspended"] = field(default="suspended", init=False)


@dataclass(frozen=True, slots=True)
class TurnFenced:
    """The checkpoint layer says another writer owns the run, and the run record (when the
    runner could ask it) did not say otherwise. The caller re-reads the run before it
    believes this: only the run record decides who drives a run."""

    detail: str
    retry_count: int = 0
    checkpoint_stats: CheckpointStats = CheckpointStats()
    kind: Literal["fenced"] = field(default="fenced", init=False)


@dataclass(frozen=True, slots=True)
class TurnFailed:
    error: ClassifiedError
    checkpoint_version: str | None = None
    retry_count: int = 0
    checkpoint_stats: CheckpointStats = CheckpointStats()
    #: tool calls dropped by the attempts of this turn, so the loss is reported on failure too
    dropped_tool_calls: tuple[DroppedToolCall, ...] = ()
    kind: Literal["failed"] = field(default="failed", init=False)


TurnOutcome = TurnCompleted | TurnSuspended | TurnFailed | TurnFenced
