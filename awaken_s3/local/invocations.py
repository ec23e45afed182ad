"""What the event source reports: busy workers, finished invocations, containers, counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from awaken_s3.local.batch_response import Outcome
from awaken_s3.local.sqs_events import QueueRecord


class _HoldsRecords:
    """The ids and bodies of the queue records an invocation was given."""

    records: tuple[QueueRecord, ...]

    @property
    def message_ids(self) -> tuple[str, ...]:
        return tuple(r.message_id for r in self.records)

    @property
    def bodies(self) -> tuple[str, ...]:
        return tuple(r.body for r in self.records)


@dataclass(frozen=True)
class BusyWorker(_HoldsRecords):
    """A container running an invocation right now."""

    pid: int
    request_id: str
    log_stream_name: str
    records: tuple[QueueRecord, ...]
    #: Unix time the invocation started, and its deadline
    started_at: float
    deadline_at: float


@dataclass(frozen=True)
class InvocationResult(_HoldsRecords):
    """One finished invocation and what became of its records."""

    request_id: str
    records: tuple[QueueRecord, ...]
    outcome: Outcome
    #: the handler's return value (outcome "ok")
    response: Any
    #: the handler's error, why the container ended, or why the response failed the batch
    error: str | None
    #: message ids deleted from the queue, and those left to come back
    deleted: tuple[str, ...]
    retried: tuple[str, ...]
    #: None when no container could be started (an init failure)
    pid: int | None
    log_stream_name: str | None
    cold_start: bool
    #: Unix time the invocation started; seconds it took (cold start included)
    started_at: float
    duration: float


@dataclass(frozen=True)
class ContainerInfo:
    pid: int
    log_stream_name: str
    busy: bool
    invocations: int


@dataclass(frozen=True)
class EventSourceStats:
    invocations: int
    ok: int
    error: int
    timeout: int
    killed: int
    cold_starts: int
    records_deleted: int
    records_retried: int

    @classmethod
    def of(cls, results: Iterable[InvocationResult]) -> EventSourceStats:
        outcomes: Counter[str] = Counter()
        cold = deleted = retried = 0
        for result in results:
            outcomes[result.outcome] += 1
            cold += result.cold_start
            deleted += len(result.deleted)
            retried += len(result.retried)
        return cls(
            invocations=sum(outcomes.values()),
            ok=outcomes["ok"],
            error=outcomes["error"],
            timeout=outcomes["timeout"],
            killed=outcomes["killed"],
            cold_starts=cold,
            records_deleted=deleted,
            records_retried=retried,
        )
