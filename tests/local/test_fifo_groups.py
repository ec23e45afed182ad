"""FIFO dispatch eligibility: one batch per group in flight, held records in order (pure)."""

from __future__ import annotations

from awaken_s3.local.fifo_groups import GroupGate, partition
from awaken_s3.local.sqs_events import QueueRecord


def rec(message_id: str, group: str | None, handle: str = "h1") -> QueueRecord:
    return QueueRecord(
        message_id=message_id,
        receipt_handle=handle,
        body=message_id,
        group_id=group,
        receive_count=1,
        event_record={},
    )


def ids(records: list[QueueRecord]) -> list[str]:
    return [r.message_id for r in records]


def test_partition_holds_records_of_blocked_groups_only() -> None:
    records = [rec("a1", "A"), rec("b1", "B"), rec("s1", None), rec("a2", "A")]
    now, later = partition(records, {"A"})
    assert (ids(now), ids(later)) == (["b1", "s1"], ["a1", "a2"])


def test_a_group_in_flight_holds_its_redelivered_records_until_it_ends() -> None:
    gate = GroupGate()
    first = gate.admit([rec("a1", "A"), rec("b1", "B")])
    assert ids(first) == ["a1", "b1"]
    assert gate.blocked() == {"A", "B"}
    # a1's visibility ran out mid-invocation: SQS hands a1 and a2 out again.
    assert gate.admit([rec("a1", "A", "h2"), rec("a2", "A")]) == []
    assert gate.take_ready(10) == []  # A is still in flight
    gate.release(first)
    assert gate.blocked() == {"A"}  # held records keep A blocked for newcomers
    assert gate.admit([rec("a3", "A")]) == []
    nxt = gate.take_ready(2)
    assert ids(nxt) == ["a1", "a2"]
    assert nxt[0].receipt_handle == "h2"
    assert ids(gate.held) == ["a3"]  # behind the batch now in flight
    assert gate.take_ready(10) == []
    gate.release(nxt)
    assert ids(gate.take_ready(10)) == ["a3"]


def test_a_record_received_again_while_held_replaces_its_held_copy_in_place() -> None:
    gate = GroupGate()
    gate.admit([rec("a0", "A")])
    gate.admit([rec("a1", "A", "h1"), rec("a2", "A")])
    gate.admit([rec("a1", "A", "h3")])
    assert [(r.message_id, r.receipt_handle) for r in gate.held] == [
        ("a1", "h3"),
        ("a2", "h1"),
    ]


def test_take_ready_keeps_each_group_s_order_and_skips_busy_groups() -> None:
    gate = GroupGate()
    gate.admit([rec("a0", "A"), rec("b0", "B")])
    gate.admit([rec("a1", "A"), rec("b1", "B"), rec("a2", "A"), rec("b2", "B")])
    gate.release([rec("b0", "B")])
    # B is free, A is not: B's held records go, in order, up to the limit.
    assert ids(gate.take_ready(1)) == ["b1"]
    assert ids(gate.held) == ["a1", "a2", "b2"]
    assert gate.take_ready(5) == []  # b2 waits behind b1, a1 behind a0


def test_standard_queue_records_are_never_held() -> None:
    gate = GroupGate()
    assert ids(gate.admit([rec("m1", None), rec("m1", None)])) == ["m1", "m1"]
    assert gate.blocked() == set()
    gate.release([rec("m1", None)])
    assert gate.in_flight == {}


def test_drain_forgets_the_held_records() -> None:
    gate = GroupGate()
    gate.admit([rec("a0", "A")])
    gate.admit([rec("a1", "A")])
    assert ids(gate.drain()) == ["a1"]
    assert gate.held == []
