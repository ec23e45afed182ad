"""The in-memory store's evaluation of the store's conditions and updates (pure): DynamoDB's
semantics where the store's conditions meet them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.conditions import Attr, ConditionBase

from awaken_s3.threads import RunStatus, codec, writes
from awaken_s3.threads import conditions as cond
from awaken_s3.threads.evaluate import holds, updated
from awaken_s3.threads.models import Lease
from awaken_s3.threads.rules import holds_lease
from tests.fixtures.runs import run_state

RUN: dict[str, Any] = {
    "pk": "RUN#r1",
    "sk": "RUN",
    "status": "running",
    "lease_owner": "w1",
    "epoch": Decimal(7),
    "lease_until": Decimal("100.000000"),
}


@pytest.mark.parametrize(
    ("condition", "item", "expected"),
    [
        (cond.lease_held("w1", 7), RUN, True),
        (cond.lease_held("w2", 7), RUN, False),
        (cond.lease_live("w1", 7, 99.0), RUN, True),
        (cond.lease_live("w1", 7, 100.0), RUN, False),  # run out exactly at its end
        (cond.lease_dead(100.0), RUN, True),
        (cond.lease_dead(99.0), RUN, False),
        (cond.claimable("w2", 99.0), RUN, False),
        (cond.claimable("w1", 99.0), RUN, True),  # its own holder may claim again
        (cond.claimable("w2", 1.0), {k: v for k, v in RUN.items() if k != "lease_owner"}, True),
        (cond.runnable(), {**RUN, "status": "cancelled"}, False),
        (cond.new_item(), None, True),
        (cond.new_item(), RUN, False),
        # A comparison with a missing attribute, or across types, is false, not an error.
        (cond.at_epoch(7), {"pk": "RUN#r1"}, False),
        (Attr("epoch").eq("7"), RUN, False),
        (Attr("epoch").lt("8"), RUN, False),
        (~cond.at_epoch(7), {"pk": "RUN#r1"}, True),
        (Attr("sk").begins_with("RU"), RUN, True),
    ],
)
def test_conditions_hold_as_dynamodb_judges_them(
    condition: ConditionBase, item: dict[str, Any] | None, expected: bool
) -> None:
    assert holds(condition, item) is expected


def test_a_condition_it_cannot_evaluate_is_refused() -> None:
    with pytest.raises(NotImplementedError, match="Contains"):
        holds(Attr("tools").contains("add"), RUN)


def test_an_update_reads_the_item_as_it_was() -> None:
    claim = writes.claim("r1", worker="w2", now=200.0, lease_seconds=30.0, grace=10.0)
    after = updated(claim, RUN)
    assert (after["epoch"], after["lease_owner"], after["status"]) == (8, "w2", "running")
    assert after["previous_lease_until"] == RUN["lease_until"]  # before the update
    assert after["lease_until"] == Decimal("230.000000")
    # An absent attribute counts as 0 for an addition (runs stored before it existed).
    assert (
        updated(writes.Update(codec.run_key("r1"), {"usage_cache_read": writes.Add(5)}), RUN)[
            "usage_cache_read"
        ]
        == 5
    )
    released = updated(
        writes.release(
            "r1",
            worker="w1",
            epoch=7,
            now=1.0,
            status=RunStatus.SUSPENDED,
            idle_suspensions=1,
            grace=1.0,
        ),
        RUN,
    )
    assert "lease_owner" not in released and released["status"] == "suspended"


@pytest.mark.parametrize("owner", ["w1", "w2", None])
@pytest.mark.parametrize("epoch", [6, 7])
def test_a_worker_reads_the_lease_as_the_store_judges_it(owner: str | None, epoch: int) -> None:
    # The runtime judges a fence on the run as read (rules.holds_lease); the store on its
    # item (conditions.lease_held): the two must never disagree.
    run = run_state(lease=Lease(owner=owner, epoch=7, lease_until=100.0))
    assert holds_lease(run, "w1", epoch) == holds(cond.lease_held("w1", epoch), codec.run_item(run))
