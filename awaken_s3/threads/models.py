"""Thread, run and tool-call records: plain data shared by every ThreadStore backend."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import ClassifiedError, Usage


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def runnable(self) -> bool:
        """A worker may claim the run (and continue it)."""
        return self in RUNNABLE_STATUSES

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


RUNNABLE_STATUSES = frozenset({RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.SUSPENDED})
TERMINAL_STATUSES = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})


@dataclass(frozen=True, slots=True)
class Thread:
    thread_id: str
    owner: str
    message_count: int = 0
    created_at: float = 0.0
    metadata: Mapping[str, str] = field(default_factory=dict)
    #: the run most recently created on the thread; a new run is refused while it is not
    #: terminal (two live runs on one thread would race for its message positions)
    active_run: str | None = None


@dataclass(frozen=True, slots=True)
class Lease:
    """Who drives the run. ``epoch`` only grows: every claim increments it."""

    owner: str | None = None
    epoch: int = 0
    lease_until: float = 0.0


@dataclass(frozen=True, slots=True)
class RunSettings:
    model: str
    system: str | None = None
    max_tokens: int = 4096
    temperature: float | None = None
    #: names of the registered tools offered to the model; empty means none
    tools: tuple[str, ...] = ()
    #: the run fails with ``step_limit`` before starting a model turn past this index
    max_turns: int = 25
    #: the app's agent the run belongs to ("" for the default agent: runs stored before
    #: agents existed name none)
    agent: str = ""
    #: input + output tokens the run may spend; a committed turn past it fails the run with
    #: ``budget_exhausted`` (None: no budget)
    token_budget: int | None = None


@dataclass(frozen=True, slots=True)
class RunState:
    run_id: str
    thread_id: str
    owner: str
    settings: RunSettings
    status: RunStatus = RunStatus.QUEUED
    #: index of the next model turn (= model turns committed so far)
    turn: int = 0
    #: messages committed in the thread, as this run last advanced it
    message_count: int = 0
    usage: Usage = field(default_factory=Usage)
    error: ClassifiedError | None = None
    stop_reason: str | None = None
    lease: Lease = field(default_factory=Lease)
    created_at: float = 0.0
    updated_at: float = 0.0
    #: when the sweeper should look at the run if nobody drives it (the sparse index's sort
    #: key); None once the run ended, which takes it out of the index
    sweep_at: float | None = None
    #: ``lease_until`` of the lease this epoch's claim replaced: 0 when the previous holder
    #: released it, the expiry of a holder that died otherwise (resume-delay metric)
    previous_lease_until: float = 0.0
    #: suspensions in a row that committed nothing and did not grow the checkpoint
    idle_suspensions: int = 0
    #: times in a row the sweeper re-sent the run without it making progress in between
    rescues: int = 0
    #: of those, the re-sends after which a worker did claim the run and still committed
    #: nothing: a run every worker fails on (a run merely waiting in a backlog is not one)
    fruitless_rescues: int = 0
    #: ``message_count`` and lease epoch when the sweeper last rescued the run (-1: never)
    rescue_mark: int = -1
    rescue_epoch: int = -1
    #: digest of the request that created the run (its messages and settings): a retried
    #: create with another message is told apart (None on runs stored before it existed)
    request_digest: str | None = None

    def with_(self, **changes: Any) -> RunState:
        return replace(self, **changes)


class ToolCallStatus(StrEnum):
    CLAIMED = "claimed"
    #: the call ran out of time (the invocation's deadline or the tool's own timeout): its
    #: outcome is unknown, like a claim whose worker died
    TIMED_OUT = "timed_out"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """A tool call's durable trace: claimed before the callable runs, finished after.

    A call is identified by its run, its turn and its id within the turn
    (``TOOL#<turn>#<id>``): providers may repeat ids from one turn to the next. ``turn`` is
    None only on a record stored before the turn was part of the key (``TOOL#<id>``).
    """

    run_id: str
    tool_use_id: str
    name: str
    status: ToolCallStatus
    #: the lease epoch of the worker that claimed (or last re-claimed) the call
    epoch: int
    attempts: int = 1
    content: str | None = None
    is_error: bool = False
    #: the run's ``turn`` counter when the call ran: the model turns committed so far, so
    #: the calls of each assistant message have their own (None: the legacy key layout)
    turn: int | None = None
    #: digest of the call's canonical input: a record answers only the call it was made for
    input_digest: str | None = None
    #: attempts that ran out of time
    timeouts: int = 0
    #: taken over from a legacy record of the same call started before the upgrade: its
    #: outcome is unknown, whatever that record says
    adopted: bool = False
    #: the ToolContext's idempotency key keeps the legacy formula (run, id): the call's first
    #: attempt, started before the upgrade, used it
    legacy_key: bool = False


@dataclass(frozen=True, slots=True)
class TurnCommit:
    """What one commit appends and how it advances the run.

    ``base`` is the run state the committing worker holds. The messages land at
    ``base.message_count``, ``+1``, ...; the commit holds only if the stored run is still
    ``running`` at ``base.turn`` with that many messages under the lease epoch ``base.lease.epoch``.
    """

    base: RunState
    messages: tuple[Message, ...]
    usage: Usage = field(default_factory=Usage)
    #: a model turn advances ``turn``; a tool-results commit does not
    advance_turn: bool = True
    stop_reason: str | None = None
    #: set to finish the run in the same transaction (``completed`` after the last turn)
    final_status: RunStatus | None = None
    #: recorded on the run with ``final_status`` (a refused turn fails its run)
    error: ClassifiedError | None = None

    @property
    def run_id(self) -> str:
        return self.base.run_id

    @property
    def thread_id(self) -> str:
        return self.base.thread_id

    @property
    def epoch(self) -> int:
        return self.base.lease.epoch

    @property
    def expected_turn(self) -> int:
        return self.base.turn

    @property
    def expected_message_count(self) -> int:
        return self.base.message_count

    @property
    def commit_id(self) -> str:
        """Deterministic per (run, epoch, position, content): a retried attempt carries the
        same id, a different turn at the same position does not.

        Finding this id on the stored messages proves an earlier attempt of this very commit
        landed (a response lost after the write), so it is recognised rather than repeated.
        """
        digest = hashlib.sha256()
        for message in self.messages:
            digest.update(message.model_dump_json().encode("utf-8"))
            digest.update(b"\0")
        return (
            f"{self.run_id}/{self.epoch}/{self.expected_turn}/{self.expected_message_count}/"
            f"{digest.hexdigest()[:16]}"
        )


@dataclass(frozen=True, slots=True)
class CommitResult:
    run: RunState
    #: the transaction had already been applied by an earlier attempt: nothing was written
    duplicate: bool = False
