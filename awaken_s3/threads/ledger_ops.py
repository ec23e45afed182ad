"""The tool-call ledger, over a backend's primitives (one algorithm for every backend:
:mod:`awaken_s3.threads.backend`).

A claim and a takeover are each one transaction ``[lease check, operation]``: the check that
the run is still at the claimer's epoch beside the write of the call, so a fenced worker
never starts a side effect.
"""

from __future__ import annotations

from collections.abc import Sequence

from awaken_s3.threads import codec, writes
from awaken_s3.threads import conditions as cond
from awaken_s3.threads.backend import Cancelled, StoreIO
from awaken_s3.threads.errors import LeaseLost, ThreadStoreError, ToolCallConflict
from awaken_s3.threads.evaluate import holds
from awaken_s3.threads.models import ToolCallRecord, ToolCallStatus


class ToolCallOperations(StoreIO):
    """The :class:`~awaken_s3.threads.base.ToolCallLedger` operations."""

    async def claim_tool_call(
        self, run_id: str, tool_use_id: str, *, name: str, epoch: int
    ) -> tuple[ToolCallRecord, bool]:
        record = ToolCallRecord(run_id, tool_use_id, name, ToolCallStatus.CLAIMED, epoch)
        cancelled = await self._lease_checked(run_id, epoch, writes.tool_claim(record))
        if cancelled is None:
            return record, True
        stored = cancelled.reasons[writes.OPERATION].item
        if stored:
            return codec.tool_of(stored), False
        existing = await self.get_tool_call(run_id, tool_use_id)
        if existing is None:
            raise ThreadStoreError(f"claim of tool call {tool_use_id} failed: {cancelled.codes}")
        return existing, False

    async def reclaim_tool_call(
        self, run_id: str, tool_use_id: str, *, epoch: int, previous_epoch: int
    ) -> ToolCallRecord:
        transaction = writes.tool_reclaim(
            run_id, tool_use_id, epoch=epoch, previous_epoch=previous_epoch
        )
        lost = await self._lease_checked(run_id, epoch, transaction) is not None
        item = await self._get(
            codec.tool_key(run_id, tool_use_id), action=f"get_tool_call {tool_use_id}"
        )
        # A repeated takeover whose first attempt landed finds the call claimed by its epoch.
        if item is not None and (not lost or holds(cond.tool_held(epoch), item)):
            return codec.tool_of(item)
        raise ToolCallConflict(
            f"tool call {tool_use_id} is no longer held by epoch {previous_epoch}"
        )

    async def finish_tool_call(
        self, run_id: str, tool_use_id: str, *, epoch: int, content: str, is_error: bool
    ) -> ToolCallRecord:
        finish = writes.tool_finish(
            run_id, tool_use_id, epoch=epoch, content=content, is_error=is_error
        )
        written = await self._write(finish, action=f"finish of tool call {tool_use_id}")
        if written.applied or (
            written.item is not None
            and holds(cond.tool_finished(epoch, content, is_error), written.item)
        ):
            assert written.item is not None
            return codec.tool_of(written.item)
        raise ToolCallConflict(f"tool call {tool_use_id} is not held by epoch {epoch}")

    async def get_tool_call(self, run_id: str, tool_use_id: str) -> ToolCallRecord | None:
        item = await self._get(
            codec.tool_key(run_id, tool_use_id), action=f"get_tool_call {tool_use_id}"
        )
        return None if item is None else codec.tool_of(item)

    async def _lease_checked(
        self, run_id: str, epoch: int, transaction: Sequence[writes.Write]
    ) -> Cancelled | None:
        """Send a ``[lease check, operation]`` transaction. None when it applied, else the
        reasons when the operation's own condition failed; LeaseLost for a lost lease.

        The calls of one turn are claimed concurrently, each transaction checking the same
        run item, so DynamoDB may cancel one for TransactionConflict: it is sent again (claims
        and takeovers are idempotent under their conditions)."""
        action = f"tool call on run {run_id}"
        cancelled = await self._transact_retrying(transaction, action=action)
        if cancelled is None:
            return None
        if cancelled.failed(writes.LEASE_CHECK):
            raise LeaseLost(f"run {run_id} is no longer at epoch {epoch}")
        if cancelled.failed(writes.OPERATION):
            return cancelled
        raise self._cancelled(cancelled, action=action)
