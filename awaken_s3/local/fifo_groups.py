"""FIFO message-group dispatch: one batch of a group in flight at a time, in order (no I/O).

SQS FIFO itself hands out none of a group's messages while one of them is in flight. But a
message whose visibility timeout runs out while its invocation is still running is in flight
no more: SQS hands it out again (and, in the same answer, the messages behind it). Lambda
"sends only one batch at a time for a group", so such records must wait. The gate holds them,
in the order received, until the group's invocation ends, then hands them out as the group's
next batch. A message received again while held replaces its held copy (the newest receipt
handle is the one SQS honours). Records without a group (standard queues) are never held.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from awaken_s3.local.sqs_events import QueueRecord


def partition(
    records: Sequence[QueueRecord], blocked_groups: Collection[str]
) -> tuple[list[QueueRecord], list[QueueRecord]]:
    """``(dispatch now, hold)``: a record waits when its group is blocked (in flight, or with
    older records held)."""
    now = [r for r in records if r.group_id is None or r.group_id not in blocked_groups]
    later = [r for r in records if r.group_id is not None and r.group_id in blocked_groups]
    return now, later


def groups_of(records: Iterable[QueueRecord]) -> set[str]:
    return {r.group_id for r in records if r.group_id is not None}


@dataclass
class GroupGate:
    """The groups with a batch in flight, and the records held behind them."""

    in_flight: dict[str, int] = field(default_factory=dict)
    held: list[QueueRecord] = field(default_factory=list)

    def blocked(self) -> set[str]:
        return set(self.in_flight) | groups_of(self.held)

    def admit(self, records: Sequence[QueueRecord]) -> list[QueueRecord]:
        """Take freshly received records: returns those to dispatch now (their groups are then
        in flight) and holds the rest."""
        now, later = partition(records, self.blocked())
        for record in later:
            self._hold(record)
        self.claim(now)
        return now

    def take_ready(self, limit: int) -> list[QueueRecord]:
        """Up to ``limit`` held records whose group is free, oldest first; their groups are then
        in flight. A group's later records stay held behind a taken one."""
        taken: list[QueueRecord] = []
        busy = set(self.in_flight)
        for record in self.held:
            if len(taken) >= limit:
                break
            if record.group_id in busy:
                continue
            taken.append(record)
        # The groups just taken block their own later records from now on.
        self.held = [r for r in self.held if not any(r is t for t in taken)]
        self.claim(taken)
        return taken

    def claim(self, records: Iterable[QueueRecord]) -> None:
        for group in groups_of(records):
            self.in_flight[group] = self.in_flight.get(group, 0) + 1

    def release(self, records: Iterable[QueueRecord]) -> None:
        for group in groups_of(records):
            count = self.in_flight.get(group, 0) - 1
            if count > 0:
                self.in_flight[group] = count
            else:
                self.in_flight.pop(group, None)

    def drain(self) -> list[QueueRecord]:
        """Every held record, forgotten (the event source is stopping)."""
        held, self.held = self.held, []
        return held

    def _hold(self, record: QueueRecord) -> None:
        for index, existing in enumerate(self.held):
            if existing.message_id == record.message_id:
                self.held[index] = record
                return
        self.held.append(record)
