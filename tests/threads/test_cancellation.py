"""The pure reading of a cancelled commit transaction, without any AWS."""

from __future__ import annotations

import pytest

from awaken_s3.messages import Message
from awaken_s3.threads import Lease, RunStatus, TurnCommit
from awaken_s3.threads.cancellation import (
    CONDITION_FAILED,
    ItemReason,
    StoredMessage,
    Verdict,
    diagnose_commit,
    parse_reason_codes,
)
from tests.fixtures.runs import run_state

#: a run mid-way: three turns and five messages committed, held by w1 at epoch 7
BASE = run_state(status=RunStatus.RUNNING, turn=3, message_count=5, lease=Lease("w1", 7, 100.0))
COMMIT = TurnCommit(base=BASE, messages=(Message.assistant("answer"),))
OK = ItemReason(None)


def taken(message: Message, commit_id: str | None) -> ItemReason:
    return ItemReason(CONDITION_FAILED, StoredMessage(5, message, commit_id))


def run_reason(**changes: object) -> ItemReason:
    return ItemReason(CONDITION_FAILED, BASE.with_(**changes))


def test_reason_codes_normalise_the_none_spelling() -> None:
    reasons = [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}, {}, {"Code": ""}]
    assert parse_reason_codes(reasons) == [None, CONDITION_FAILED, None, None]


def test_our_own_commit_id_at_the_position_is_a_duplicate() -> None:
    d = diagnose_commit(
        COMMIT,
        messages=[taken(Message.assistant("answer"), COMMIT.commit_id)],
        run=run_reason(turn=4, message_count=6),
        thread=ItemReason(CONDITION_FAILED),
    )
    assert d.verdict == Verdict.DUPLICATE


def test_duplicate_wins_even_after_losing_the_lease_since() -> None:
    # The earlier attempt landed; a newer worker claimed afterwards. The commit did happen.
    d = diagnose_commit(
        COMMIT,
        messages=[taken(Message.assistant("answer"), COMMIT.commit_id)],
        run=run_reason(turn=4, message_count=6, lease=Lease("w2", 8, 200.0)),
        thread=ItemReason(CONDITION_FAILED),
    )
    assert d.verdict == Verdict.DUPLICATE


def test_a_newer_epoch_fences_even_when_it_wrote_the_same_text() -> None:
    d = diagnose_commit(
        COMMIT,
        messages=[taken(Message.assistant("answer"), "r1/8/3/5/abc")],
        run=run_reason(turn=4, message_count=6, lease=Lease("w2", 8, 200.0)),
        thread=ItemReason(CONDITION_FAILED),
    )
    assert d.verdict == Verdict.FENCED and "epoch 8" in d.detail


def test_newer_epoch_without_message_clash_is_fenced() -> None:
    d = diagnose_commit(COMMIT, messages=[OK], run=run_reason(lease=Lease("w2", 8, 1.0)), thread=OK)
    assert d.verdict == Verdict.FENCED


def test_same_content_same_epoch_turn_already_advanced_is_a_duplicate() -> None:
    d = diagnose_commit(
        COMMIT,
        messages=[taken(Message.assistant("answer"), "other-attempt")],
        run=run_reason(turn=4, message_count=6),
        thread=ItemReason(CONDITION_FAILED),
    )
    assert d.verdict == Verdict.DUPLICATE


@pytest.mark.parametrize(
    ("messages", "run", "needle"),
    [
        ([taken(Message.assistant("other"), "x")], run_reason(turn=4, message_count=6), "moved on"),
        ([OK], run_reason(status=RunStatus.CANCELLED), "cancelled"),
        ([OK], run_reason(message_count=9), "moved on"),
        ([OK], ItemReason(CONDITION_FAILED, None), "no longer exists"),
    ],
)
def test_everything_else_is_a_thread_that_moved_on(
    messages: list[ItemReason], run: ItemReason, needle: str
) -> None:
    d = diagnose_commit(COMMIT, messages=messages, run=run, thread=OK)
    assert d.verdict == Verdict.MOVED_ON and needle in d.detail


def test_transient_codes_only_mean_retry_and_others_are_errors() -> None:
    conflict = ItemReason("TransactionConflict")
    assert diagnose_commit(COMMIT, messages=[conflict], run=OK, thread=OK).verdict == Verdict.RETRY
    throttled = ItemReason("ProvisionedThroughputExceeded")
    verdict = diagnose_commit(COMMIT, messages=[OK], run=throttled, thread=conflict).verdict
    assert verdict == Verdict.RETRY
    invalid = ItemReason("ValidationError")
    assert diagnose_commit(COMMIT, messages=[invalid], run=OK, thread=OK).verdict == Verdict.ERROR
    # A lost condition is never a retry, even alongside a transient code.
    mixed = diagnose_commit(
        COMMIT, messages=[conflict], run=run_reason(lease=Lease("w2", 8, 1.0)), thread=OK
    )
    assert mixed.verdict == Verdict.FENCED


def test_commit_id_depends_on_content_and_position() -> None:
    same = TurnCommit(base=BASE, messages=(Message.assistant("answer"),))
    other_text = TurnCommit(base=BASE, messages=(Message.assistant("answer!"),))
    other_epoch = TurnCommit(base=BASE.with_(lease=Lease("w1", 8, 1.0)), messages=same.messages)
    assert same.commit_id == COMMIT.commit_id
    assert len({COMMIT.commit_id, other_text.commit_id, other_epoch.commit_id}) == 3
