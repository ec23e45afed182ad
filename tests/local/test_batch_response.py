"""Which records an invocation deletes, per Lambda's partial batch response rules (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from awaken_s3.local.batch_response import (
    InvalidBatchResponse,
    Outcome,
    Settlement,
    batch_item_failures,
    settle,
)

IDS = ["m1", "m2", "m3"]


@pytest.mark.parametrize(
    "response",
    [
        None,
        {},
        {"batchItemFailures": None},
        {"batchItemFailures": []},
        {"statusCode": 200},  # no batchItemFailures at all
    ],
)
def test_a_complete_success_deletes_every_record(response: Any) -> None:
    assert settle(IDS, "ok", response) == Settlement(delete=tuple(IDS), retry=())


def test_only_the_records_named_come_back() -> None:
    response = {"batchItemFailures": [{"itemIdentifier": "m2"}, {"itemIdentifier": "m2"}]}
    assert settle(IDS, "ok", response) == Settlement(delete=("m1", "m3"), retry=("m2",))
    everything = {"batchItemFailures": [{"itemIdentifier": i} for i in IDS]}
    assert settle(IDS, "ok", everything) == Settlement(delete=(), retry=tuple(IDS))


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        ("ok", "not an object"),
        (["m1"], "not an object"),
        ({"batchItemFailures": "m1"}, "not a list"),
        ({"batchItemFailures": ["m1"]}, "no itemIdentifier"),
        ({"batchItemFailures": [{"itemidentifier": "m1"}]}, "no itemIdentifier"),
        ({"batchItemFailures": [{"itemIdentifier": None}]}, "null, empty"),
        ({"batchItemFailures": [{"itemIdentifier": ""}]}, "null, empty"),
        ({"batchItemFailures": [{"itemIdentifier": 7}]}, "not a string"),
        ({"batchItemFailures": [{"itemIdentifier": "m9"}]}, "'m9' is not in the batch"),
    ],
)
def test_an_unreadable_response_fails_the_whole_batch(response: Any, reason: str) -> None:
    settlement = settle(IDS, "ok", response)
    assert (settlement.delete, settlement.retry) == ((), tuple(IDS))
    assert settlement.problem is not None and reason in settlement.problem
    with pytest.raises(InvalidBatchResponse):
        batch_item_failures(response, IDS)


@pytest.mark.parametrize("outcome", ["error", "timeout", "killed"])
def test_a_failed_invocation_deletes_nothing(outcome: Outcome) -> None:
    response: dict[str, Any] = {"batchItemFailures": []}
    assert settle(IDS, outcome, response) == Settlement(delete=(), retry=tuple(IDS))


def test_without_report_batch_item_failures_the_response_is_ignored() -> None:
    response = {"batchItemFailures": [{"itemIdentifier": "m2"}]}
    assert settle(IDS, "ok", response, report_batch_item_failures=False) == Settlement(
        delete=tuple(IDS), retry=()
    )
    assert settle(IDS, "ok", "junk", report_batch_item_failures=False).delete == tuple(IDS)
    assert settle(IDS, "error", None, report_batch_item_failures=False).delete == ()
