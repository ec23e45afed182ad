"""The turn commit and its diagnosis, over a backend's primitives (one algorithm for every
backend: :mod:`awaken_s3.threads.backend`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from awaken_s3.threads import codec, rules, writes
from awaken_s3.threads.backend import Reason, StoreIO, logger
from awaken_s3.threads.cancellation import ItemReason, Verdict, diagnose_commit
from awaken_s3.threads.errors import CommitFenced, ThreadMovedOn
from awaken_s3.threads.models import CommitResult, RunState, TurnCommit


def request_token(commit_id: str) -> str:
    """DynamoDB's idempotency token (<= 36 chars): a retried identical commit within its
    window is acknowledged without being applied twice."""
    return hashlib.sha256(commit_id.encode()).hexdigest()[:36]


class CommitOperations(StoreIO):
    """:meth:`~awaken_s3.threads.base.RunStore.commit_turn`."""

    async def commit_turn(self, commit: TurnCommit) -> CommitResult:
        items = await self._message_items(
            commit.thread_id, commit.expected_message_count, commit.messages, commit.commit_id
        )
        transaction = writes.commit(commit, items, now=self._clock())
        action = f"commit of run {commit.run_id}"
        # Sent again while it is cancelled for transient reasons or gets no answer: the dangerous
        # case is an attempt that landed with its answer lost, and the diagnosis recognises it
        # (this commit's id at the positions), so it is never written twice.
        cancelled = await self._transact_retrying(
            transaction, action=action, token=request_token(commit.commit_id), unanswered=True
        )
        if cancelled is None:
            return CommitResult(rules.apply_commit(commit, now=self._clock()))
        verdict, detail = await self._diagnose(commit, cancelled.reasons)
        if verdict == Verdict.DUPLICATE:
            logger.info("commit %s had already landed: %s", commit.commit_id, detail)
            return CommitResult(await self._stored_run(commit), duplicate=True)
        if verdict == Verdict.FENCED:
            raise CommitFenced(detail)
        if verdict == Verdict.MOVED_ON:
            raise ThreadMovedOn(detail)
        raise self._cancelled(cancelled, action=action)

    async def _stored_run(self, commit: TurnCommit) -> RunState:
        item = await self._get(codec.run_key(commit.run_id), action=f"get_run {commit.run_id}")
        assert item is not None, "a duplicate commit's run exists"
        return await self._run_of(item)

    async def _diagnose(self, commit: TurnCommit, reasons: Sequence[Reason]) -> tuple[Verdict, str]:
        n = len(commit.messages)
        if len(reasons) != n + 2:
            return Verdict.ERROR, f"unexpected cancellation reasons {[r.code for r in reasons]}"
        messages = [
            ItemReason(reason.code, await self._message_of(reason.item) if reason.item else None)
            for reason in reasons[:n]
        ]
        run_item = reasons[n].item
        diagnosis = diagnose_commit(
            commit,
            messages=messages,
            # The same run as the commit's base: its settings are the base's.
            run=ItemReason(
                reasons[n].code,
                codec.run_of(run_item, system=commit.base.settings.system) if run_item else None,
            ),
            thread=ItemReason(reasons[n + 1].code),
        )
        return diagnosis.verdict, diagnosis.detail
