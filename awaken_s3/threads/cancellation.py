"""Reading a cancelled commit transaction: what happened, and what the caller must do (pure).

``TransactWriteItems`` either applies every item or none, and on failure reports one reason per
item, in request order. The commit writes ``[message puts..., run update, thread update]``; each
reason carries the item as it was (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), decoded by
the caller into the models below. A lost condition is never retried as is: it is a duplicate of
an earlier attempt, a zombie fenced by a newer epoch, or a thread that moved on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from awaken_s3.messages import Message
from awaken_s3.threads.errors import StoreThrottled, ThreadStoreError
from awaken_s3.threads.models import RunState, RunStatus, TurnCommit

CONDITION_FAILED = "ConditionalCheckFailed"
# Reason codes DynamoDB documents as transient for a transaction: the same request may succeed
# later. Idempotent conditions make a retry safe even if an earlier attempt did land.
TRANSIENT_CODES = frozenset(
    {
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
        "InternalServerError",
    }
)


#: cancellation reason codes of a transaction that was throttled
THROTTLED_REASONS = frozenset(
    {"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)


def transient_cancellation(codes: Sequence[str | None]) -> bool:
    """Whether a cancelled transaction failed for transient reasons only (no lost condition):
    the same request may be sent again."""
    given = [code for code in codes if code is not None]
    return bool(given) and all(code in TRANSIENT_CODES for code in given)


class Verdict(StrEnum):
    DUPLICATE = "duplicate"  # this commit already landed (an earlier attempt of ours)
    FENCED = "fenced"  # a newer epoch drives the run
    MOVED_ON = "moved_on"  # other messages / turn / status: reload, never overwrite
    RETRY = "retry"  # transient only: the same request may be sent again
    ERROR = "error"  # a validation or unknown failure


@dataclass(frozen=True, slots=True)
class StoredMessage:
    seq: int
    #: None when the body was offloaded and not fetched
    message: Message | None
    commit_id: str | None


@dataclass(frozen=True, slots=True)
class ItemReason:
    """One item's reason. ``code`` None means its condition held."""

    code: str | None
    existing: StoredMessage | RunState | None = None


@dataclass(frozen=True, slots=True)
class CommitDiagnosis:
    verdict: Verdict
    detail: str


def parse_reason_codes(reasons: Sequence[Mapping[str, Any]]) -> list[str | None]:
    """DynamoDB spells a passing item's code ``"None"``; normalise it to None."""
    codes: list[str | None] = []
    for reason in reasons:
        code = reason.get("Code")
        codes.append(None if code in (None, "None", "") else str(code))
    return codes


def diagnose_commit(
    commit: TurnCommit,
    *,
    messages: Sequence[ItemReason],
    run: ItemReason,
    thread: ItemReason,
) -> CommitDiagnosis:
    all_reasons = [*messages, run, thread]
    codes = [r.code for r in all_reasons if r.code is not None]
    if not codes:
        return CommitDiagnosis(Verdict.ERROR, "transaction cancelled without a reason")
    if CONDITION_FAILED not in codes:
        if transient_cancellation(codes):
            return CommitDiagnosis(Verdict.RETRY, f"transient: {', '.join(sorted(set(codes)))}")
        return CommitDiagnosis(Verdict.ERROR, f"transaction cancelled: {', '.join(codes)}")

    stored = [r.existing for r in messages if isinstance(r.existing, StoredMessage)]
    every_position_taken = len(stored) == len(commit.messages) and all(
        r.code == CONDITION_FAILED for r in messages
    )
    if every_position_taken and all(m.commit_id == commit.commit_id for m in stored):
        return CommitDiagnosis(Verdict.DUPLICATE, "an earlier attempt of this commit landed")

    stored_run = run.existing if isinstance(run.existing, RunState) else None
    if run.code == CONDITION_FAILED and stored_run is None:
        return CommitDiagnosis(Verdict.MOVED_ON, f"run {commit.run_id} no longer exists")
    if stored_run is not None and stored_run.lease.epoch != commit.epoch:
        return CommitDiagnosis(
            Verdict.FENCED,
            f"run {commit.run_id} is at epoch {stored_run.lease.epoch}, this worker holds "
            f"{commit.epoch}",
        )
    if (
        every_position_taken
        and all(
            m.message is not None and m.message == mine
            for m, mine in zip(stored, commit.messages, strict=True)
        )
        and (
            stored_run is None or stored_run.turn > commit.expected_turn or not commit.advance_turn
        )
    ):
        return CommitDiagnosis(Verdict.DUPLICATE, "the same turn is already committed there")
    if stored_run is not None and stored_run.status != RunStatus.RUNNING:
        return CommitDiagnosis(
            Verdict.MOVED_ON, f"run {commit.run_id} is {stored_run.status.value}, not running"
        )
    return CommitDiagnosis(
        Verdict.MOVED_ON,
        f"thread {commit.thread_id} moved on from turn {commit.expected_turn} / "
        f"message {commit.expected_message_count}",
    )


def cancelled_error(codes: Iterable[str | None], *, action: str, table: str) -> ThreadStoreError:
    """The store error for a transaction cancelled for reasons that are no outcome of the
    contract (no lost condition), once nobody retries it any more."""
    reasons = sorted({code for code in codes if code is not None})
    if set(reasons) & THROTTLED_REASONS and set(reasons) <= TRANSIENT_CODES:
        return StoreThrottled(
            f"{action}: DynamoDB throttled the transaction on table {table!r} "
            f"({', '.join(reasons)}); still throttled after the retries"
        )
    return ThreadStoreError(
        f"{action}: transaction on table {table!r} cancelled: {', '.join(reasons) or 'no reason'}"
    )
