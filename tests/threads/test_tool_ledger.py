"""The tool-call ledger's identity, on memory and on DynamoDB (moto): a record is keyed by
(run, turn, call id), answers only the call it was made for, and a record an older build
wrote under the call id alone (the legacy key) is taken over only as an unknown outcome."""

from __future__ import annotations

import pytest

from awaken_s3.threads import (
    ThreadStore,
    ToolCallMismatch,
    ToolCallRecord,
    ToolCallStatus,
    codec,
    writes,
)
from awaken_s3.threads.persistence import BaseThreadStore
from tests.fixtures.runs import seed_run

LEASE = 30.0
CHARGE_10 = "digest-of-amount-10"
CHARGE_99 = "digest-of-amount-99"


async def _leased(store: ThreadStore) -> int:
    await seed_run(store)
    return (await store.claim_run("r1", worker="w1", lease_seconds=LEASE)).lease.epoch


async def test_a_record_answers_only_the_call_it_was_made_for(store: ThreadStore) -> None:
    epoch = await _leased(store)
    record, fresh = await store.claim_tool_call(
        "r1", "call_0", turn=1, name="charge", input_digest=CHARGE_10, epoch=epoch
    )
    assert fresh and (record.turn, record.input_digest) == (1, CHARGE_10)
    await store.finish_tool_call(
        "r1", "call_0", turn=1, epoch=epoch, content="charged 10 EUR", is_error=False
    )
    # The same call again (a redelivery) is answered from its record.
    again, fresh = await store.claim_tool_call(
        "r1", "call_0", turn=1, name="charge", input_digest=CHARGE_10, epoch=epoch
    )
    assert not fresh and again.content == "charged 10 EUR"
    # The same key asking for another input, or another tool: loud, never an answer.
    with pytest.raises(ToolCallMismatch, match="another input"):
        await store.claim_tool_call(
            "r1", "call_0", turn=1, name="charge", input_digest=CHARGE_99, epoch=epoch
        )
    with pytest.raises(ToolCallMismatch, match="'open_ticket'"):
        await store.claim_tool_call(
            "r1", "call_0", turn=1, name="open_ticket", input_digest=CHARGE_10, epoch=epoch
        )
    # The same id in the next turn is another call, with a record of its own.
    later, fresh = await store.claim_tool_call(
        "r1", "call_0", turn=2, name="charge", input_digest=CHARGE_99, epoch=epoch
    )
    assert fresh and later.status == ToolCallStatus.CLAIMED
    assert [(r.turn, r.input_digest, r.status) for r in await store.list_tool_calls("r1")] == [
        (1, CHARGE_10, ToolCallStatus.FINISHED),
        (2, CHARGE_99, ToolCallStatus.CLAIMED),
    ]


async def test_a_timed_out_call_is_taken_over_like_a_dead_worker_s(store: ThreadStore) -> None:
    epoch = await _leased(store)
    await store.claim_tool_call(
        "r1", "c1", turn=1, name="lookup", input_digest=CHARGE_10, epoch=epoch
    )
    for _ in range(2):  # a repeat whose first attempt landed counts once
        out = await store.time_out_tool_call("r1", "c1", turn=1, epoch=epoch)
        assert (out.status, out.timeouts) == (ToolCallStatus.TIMED_OUT, 1)
    await store.release_lease("r1", worker="w1", epoch=epoch)
    new = (await store.claim_run("r1", worker="w2", lease_seconds=LEASE)).lease.epoch
    seen, fresh = await store.claim_tool_call(
        "r1", "c1", turn=1, name="lookup", input_digest=CHARGE_10, epoch=new
    )
    assert not fresh and seen.status == ToolCallStatus.TIMED_OUT
    taken = await store.reclaim_tool_call("r1", "c1", turn=1, epoch=new, previous_epoch=epoch)
    assert (taken.status, taken.epoch, taken.attempts, taken.timeouts) == (
        ToolCallStatus.CLAIMED,
        new,
        2,
        1,
    )


async def _plant_legacy(store: ThreadStore, status: ToolCallStatus, *, name: str) -> None:
    """A record as the build before the turn was in the key left it: ``TOOL#<id>``."""
    legacy = ToolCallRecord(
        "r1", "call_0", name, status, 1, content="old" if status == "finished" else None
    )
    assert isinstance(store, BaseThreadStore)
    written = await store._write(writes.new(codec.tool_item(legacy)), action="plant")
    assert written.applied


@pytest.mark.parametrize(
    ("status", "legacy_key"),
    [(ToolCallStatus.CLAIMED, True), (ToolCallStatus.FINISHED, False)],
)
async def test_a_legacy_record_of_the_same_tool_is_taken_over_as_an_unknown_outcome(
    store: ThreadStore, status: ToolCallStatus, legacy_key: bool
) -> None:
    epoch = await _leased(store)
    await _plant_legacy(store, status, name="charge")
    adopted, fresh = await store.claim_tool_call(
        "r1", "call_0", turn=2, name="charge", input_digest=CHARGE_99, epoch=epoch
    )
    # Never fresh (the call may have run before the upgrade), never answered by the old text.
    assert not fresh and adopted.adopted and adopted.status == ToolCallStatus.CLAIMED
    assert (adopted.attempts, adopted.content, adopted.legacy_key) == (2, None, legacy_key)
    # A retried claim of this turn finds the adopted record itself.
    again, fresh = await store.claim_tool_call(
        "r1", "call_0", turn=2, name="charge", input_digest=CHARGE_99, epoch=epoch
    )
    assert not fresh and again == adopted
    # The legacy record now belongs to turn 2: a later turn's call with the same id is new.
    later, fresh = await store.claim_tool_call(
        "r1", "call_0", turn=3, name="charge", input_digest=CHARGE_10, epoch=epoch
    )
    assert fresh and not later.adopted
    old = await store.get_tool_call("r1", "call_0", turn=None)
    assert old is not None and old.status == status


async def test_a_legacy_record_of_another_tool_is_another_call_s(store: ThreadStore) -> None:
    epoch = await _leased(store)
    await _plant_legacy(store, ToolCallStatus.CLAIMED, name="lookup_order")
    record, fresh = await store.claim_tool_call(
        "r1", "call_0", turn=2, name="open_ticket", input_digest=CHARGE_10, epoch=epoch
    )
    assert fresh and not record.adopted and record.attempts == 1
