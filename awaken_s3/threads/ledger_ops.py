"""The tool-call ledger, over a backend's primitives (one algorithm for every backend:
:mod:`awaken_s3.threads.backend`).

A claim and a takeover are each one transaction ``[lease check, operation, ...]``: the check
that the run is still at the claimer's epoch beside the write of the call, so a fenced worker
never starts a side effect.

A call's record is keyed by (run, turn, call id) and holds the tool's name and a digest of
its input: a record found under a call's key that names another tool or another input is a
:class:`~awaken_s3.threads.errors.ToolCallMismatch`, never an answer. A claim also looks at
the call's legacy key (``TOOL#<id>``, written before the turn was part of the key): a record
of the same tool there may be this very call, started before an upgrade, so the claim takes
it over as a call whose outcome is unknown (:func:`~awaken_s3.threads.writes.tool_adopt`);
docs/THREADS.md, "Tool calls across an upgrade".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from awaken_s3.threads import codec, writes
from awaken_s3.threads import conditions as cond
from awaken_s3.threads.backend import Cancelled, Item, StoreIO
from awaken_s3.threads.errors import (
    LeaseLost,
    ThreadStoreError,
    ToolCallConflict,
    ToolCallMismatch,
)
from awaken_s3.threads.evaluate import holds
from awaken_s3.threads.models import ToolCallRecord, ToolCallStatus


def check_same_call(
    stored: ToolCallRecord, *, turn: int, name: str, input_digest: str
) -> ToolCallRecord:
    """``stored`` when it was made for the call ``(turn, name, input_digest)``; else the loud
    error (the text names the tools and the call, never the inputs). A record of another turn
    under the key is a legacy record whose free-text id happens to spell this key."""
    other_input = stored.input_digest != input_digest
    if stored.name != name or other_input or stored.turn != turn:
        raise ToolCallMismatch(
            f"tool call {stored.tool_use_id} of run {stored.run_id} at turn {stored.turn}: "
            f"the record is for {stored.name!r}"
            + (" with another input" if stored.name == name else "")
            + f", the call asks for {name!r}"
        )
    return stored


class ToolCallOperations(StoreIO):
    """The :class:`~awaken_s3.threads.base.ToolCallLedger` operations."""

    async def claim_tool_call(
        self,
        run_id: str,
        tool_use_id: str,
        *,
        turn: int,
        name: str,
        input_digest: str,
        epoch: int,
    ) -> tuple[ToolCallRecord, bool]:
        record = ToolCallRecord(
            run_id,
            tool_use_id,
            name,
            ToolCallStatus.CLAIMED,
            epoch,
            turn=turn,
            input_digest=input_digest,
        )
        cancelled = await self._lease_checked(run_id, epoch, writes.tool_claim(record))
        if cancelled is None:
            return record, True
        if cancelled.failed(writes.OPERATION):
            return await self._existing(record, cancelled), False
        legacy = cancelled.reasons[writes.LEGACY].item or await self._get(
            codec.tool_key(run_id, tool_use_id, None), action=f"get_tool_call {tool_use_id}"
        )
        return await self._adopt(record, legacy)

    async def _existing(self, record: ToolCallRecord, cancelled: Cancelled) -> ToolCallRecord:
        stored = cancelled.reasons[writes.OPERATION].item
        found = codec.tool_of(stored) if stored else await self._read_call(record)
        if found is None:
            raise ThreadStoreError(
                f"claim of tool call {record.tool_use_id} failed: {cancelled.codes}"
            )
        assert record.input_digest is not None and record.turn is not None
        return check_same_call(
            found, turn=record.turn, name=record.name, input_digest=record.input_digest
        )

    async def _read_call(self, record: ToolCallRecord) -> ToolCallRecord | None:
        return await self.get_tool_call(record.run_id, record.tool_use_id, turn=record.turn)

    async def _adopt(
        self, record: ToolCallRecord, legacy: Item | None
    ) -> tuple[ToolCallRecord, bool]:
        """Claim ``record`` as the continuation of its legacy record (outcome unknown), or
        plainly when that record turns out not to be this call's after all."""
        assert record.turn is not None
        if legacy is None or not holds(cond.legacy_adoptable(record.name, record.turn), legacy):
            return await self._claim_plain(record)
        old = codec.tool_of(legacy)
        adopted = dataclasses.replace(
            record,
            adopted=True,
            attempts=old.attempts + 1,
            # Still claimed: this call's own first attempt, whose key a re-run must reuse. A
            # finished one may be an earlier turn's call with the same id: its key is not ours.
            legacy_key=old.status != ToolCallStatus.FINISHED,
        )
        transaction = writes.tool_adopt(adopted)
        cancelled = await self._lease_checked(record.run_id, record.epoch, transaction)
        if cancelled is None:
            return adopted, False
        if cancelled.failed(writes.OPERATION):
            return await self._existing(record, cancelled), False
        return await self._claim_plain(record)

    async def _claim_plain(self, record: ToolCallRecord) -> tuple[ToolCallRecord, bool]:
        cancelled = await self._lease_checked(
            record.run_id, record.epoch, writes.tool_claim_plain(record)
        )
        if cancelled is None:
            return record, True
        return await self._existing(record, cancelled), False

    async def reclaim_tool_call(
        self, run_id: str, tool_use_id: str, *, turn: int, epoch: int, previous_epoch: int
    ) -> ToolCallRecord:
        transaction = writes.tool_reclaim(
            run_id, tool_use_id, turn=turn, epoch=epoch, previous_epoch=previous_epoch
        )
        lost = await self._lease_checked(run_id, epoch, transaction) is not None
        item = await self._get(
            codec.tool_key(run_id, tool_use_id, turn), action=f"get_tool_call {tool_use_id}"
        )
        # A repeated takeover whose first attempt landed finds the call claimed by its epoch.
        if item is not None and (not lost or holds(cond.tool_held(epoch), item)):
            return codec.tool_of(item)
        raise ToolCallConflict(
            f"tool call {tool_use_id} is no longer held by epoch {previous_epoch}"
        )

    async def time_out_tool_call(
        self, run_id: str, tool_use_id: str, *, turn: int, epoch: int
    ) -> ToolCallRecord:
        update = writes.tool_time_out(run_id, tool_use_id, turn=turn, epoch=epoch)
        written = await self._write(update, action=f"time-out of tool call {tool_use_id}")
        if written.applied or (
            written.item is not None and holds(cond.tool_timed_out(epoch), written.item)
        ):
            assert written.item is not None
            return codec.tool_of(written.item)
        raise ToolCallConflict(f"tool call {tool_use_id} is not held by epoch {epoch}")

    async def finish_tool_call(
        self,
        run_id: str,
        tool_use_id: str,
        *,
        turn: int,
        epoch: int,
        content: str,
        is_error: bool,
        timed_out: bool = False,
    ) -> ToolCallRecord:
        finish = writes.tool_finish(
            run_id,
            tool_use_id,
            turn=turn,
            epoch=epoch,
            content=content,
            is_error=is_error,
            timed_out=timed_out,
        )
        written = await self._write(finish, action=f"finish of tool call {tool_use_id}")
        if written.applied or (
            written.item is not None
            and holds(cond.tool_finished(epoch, content, is_error), written.item)
        ):
            assert written.item is not None
            return codec.tool_of(written.item)
        raise ToolCallConflict(f"tool call {tool_use_id} is not held by epoch {epoch}")

    async def get_tool_call(
        self, run_id: str, tool_use_id: str, *, turn: int | None
    ) -> ToolCallRecord | None:
        item = await self._get(
            codec.tool_key(run_id, tool_use_id, turn), action=f"get_tool_call {tool_use_id}"
        )
        return None if item is None else codec.tool_of(item)

    async def list_tool_calls(self, run_id: str) -> list[ToolCallRecord]:
        items = await self._query(writes.tool_calls(run_id), action=f"tool calls of {run_id}")
        return [codec.tool_of(item) for item in items]

    async def _lease_checked(
        self, run_id: str, epoch: int, transaction: Sequence[writes.Write]
    ) -> Cancelled | None:
        """Send a ``[lease check, operation, ...]`` transaction. None when it applied, else
        the reasons when a write past the lease check lost its condition; LeaseLost for a lost
        lease.

        The calls of one turn are claimed concurrently, each transaction checking the same
        run item, so DynamoDB may cancel one for TransactionConflict: it is sent again (claims
        and takeovers are idempotent under their conditions)."""
        action = f"tool call on run {run_id}"
        cancelled = await self._transact_retrying(transaction, action=action)
        if cancelled is None:
            return None
        if cancelled.failed(writes.LEASE_CHECK):
            raise LeaseLost(f"run {run_id} is no longer at epoch {epoch}")
        if any(cancelled.failed(at) for at in range(writes.OPERATION, len(transaction))):
            return cancelled
        raise self._cancelled(cancelled, action=action)
