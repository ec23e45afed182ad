"""An in-process thread store with the DynamoDB store's semantics, for tests and local use.

:class:`InMemoryThreadStore` implements every contract of :mod:`awaken_s3.threads.base`
(``RunStore``, ``ToolCallLedger``, ``RunSweepStore``) in one class, as the DynamoDB store
does: one lock stands for DynamoDB's transactions, so a tool-call claim is checked against
the run's epoch atomically.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

from awaken_s3.ids import validate_run_id, validate_thread_id
from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import rules
from awaken_s3.threads.cancellation import (
    CONDITION_FAILED,
    ItemReason,
    StoredMessage,
    Verdict,
    diagnose_commit,
)
from awaken_s3.threads.errors import (
    CommitFenced,
    LeaseLost,
    LeaseUnavailable,
    RunActive,
    RunChanged,
    RunExists,
    RunNotFound,
    ThreadExists,
    ThreadMovedOn,
    ThreadNotFound,
    ThreadStoreError,
    ToolCallConflict,
)
from awaken_s3.threads.models import (
    CommitResult,
    Lease,
    RunSettings,
    RunState,
    RunStatus,
    Thread,
    ToolCallRecord,
    ToolCallStatus,
    TurnCommit,
)


class InMemoryThreadStore:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        sweep_grace: float = rules.DEFAULT_SWEEP_GRACE,
    ) -> None:
        self._clock = clock
        self._grace = sweep_grace
        self._lock = asyncio.Lock()
        self._threads: dict[str, Thread] = {}
        self._messages: dict[str, dict[int, StoredMessage]] = {}
        self._runs: dict[str, RunState] = {}
        self._tools: dict[tuple[str, str], ToolCallRecord] = {}

    async def create_thread(
        self, thread_id: str, *, owner: str, metadata: Mapping[str, str] | None = None
    ) -> Thread:
        validate_thread_id(thread_id)
        async with self._lock:
            if thread_id in self._threads:
                raise ThreadExists(f"thread {thread_id} already exists")
            thread = Thread(thread_id, owner, 0, self._clock(), dict(metadata or {}))
            self._threads[thread_id] = thread
            self._messages[thread_id] = {}
            return thread

    async def get_thread(self, thread_id: str, *, owner: str | None = None) -> Thread:
        validate_thread_id(thread_id)
        thread = self._threads.get(thread_id)
        if thread is None or (owner is not None and thread.owner != owner):
            raise ThreadNotFound(f"thread {thread_id} not found")
        return thread

    async def load_messages(self, thread_id: str) -> list[Message]:
        validate_thread_id(thread_id)
        stored = self._messages.get(thread_id, {})
        return [m.message for _, m in sorted(stored.items()) if m.message is not None]

    async def create_run(
        self,
        run_id: str,
        *,
        thread_id: str,
        owner: str,
        settings: RunSettings,
        messages: Sequence[Message] = (),
    ) -> RunState:
        validate_run_id(run_id)
        digest = rules.run_request_digest(settings, messages)
        async with self._lock:
            thread = await self.get_thread(thread_id, owner=owner)
            existing = self._runs.get(run_id)
            if existing is not None:
                if rules.same_run_request(
                    existing,
                    thread_id=thread_id,
                    owner=owner,
                    settings=settings,
                    request_digest=digest,
                ):
                    return existing
                raise RunExists(f"run {run_id} already exists")
            active = self._runs.get(thread.active_run) if thread.active_run else None
            if rules.active_run_blocks(active, run_id):
                assert active is not None
                raise RunActive(
                    f"thread {thread_id} has an active run {active.run_id}", run_id=active.run_id
                )
            now = self._clock()
            start = thread.message_count
            for offset, message in enumerate(messages):
                self._messages[thread_id][start + offset] = StoredMessage(
                    start + offset, message, f"create/{run_id}"
                )
            count = start + len(messages)
            self._threads[thread_id] = dataclasses.replace(
                thread, message_count=count, active_run=run_id
            )
            run = RunState(
                run_id=run_id,
                thread_id=thread_id,
                owner=owner,
                settings=settings,
                message_count=count,
                created_at=now,
                updated_at=now,
                sweep_at=now + self._grace,
                request_digest=digest,
            )
            self._runs[run_id] = run
            return run

    async def get_run(self, run_id: str) -> RunState:
        validate_run_id(run_id)
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(f"run {run_id} not found")
        return run

    async def claim_run(self, run_id: str, *, worker: str, lease_seconds: float) -> RunState:
        async with self._lock:
            run = await self.get_run(run_id)
            now = self._clock()
            if not rules.can_claim(run, worker, now=now):
                raise LeaseUnavailable(
                    f"run {run_id} is {run.status.value}, leased by {run.lease.owner!r}"
                )
            claimed = rules.apply_claim(
                run, worker, now=now, lease_seconds=lease_seconds, sweep_grace=self._grace
            )
            self._runs[run_id] = claimed
            return claimed

    async def _update_leased(
        self,
        run_id: str,
        worker: str,
        epoch: int,
        change: Callable[[RunState, float], RunState],
        applied: Callable[[RunState], bool] | None = None,
        *,
        live: bool = False,
    ) -> RunState:
        async with self._lock:
            run = await self.get_run(run_id)
            now = self._clock()
            if not rules.holds_lease(run, worker, epoch):
                if applied is not None and applied(run):
                    return run
                raise LeaseLost(
                    f"run {run_id} is leased by {run.lease.owner!r} at epoch {run.lease.epoch}"
                )
            if live and not rules.renewal_holds(run, worker, epoch, now=now):
                raise LeaseLost(rules.expired_lease(run, epoch))
            updated = change(run, now)
            self._runs[run_id] = updated
            return updated

    async def renew_lease(
        self, run_id: str, *, worker: str, epoch: int, lease_seconds: float
    ) -> RunState:
        def change(run: RunState, now: float) -> RunState:
            return rules.apply_renewal(
                run, now=now, lease_seconds=lease_seconds, sweep_grace=self._grace
            )

        return await self._update_leased(run_id, worker, epoch, change, live=True)

    async def release_lease(
        self,
        run_id: str,
        *,
        worker: str,
        epoch: int,
        status: RunStatus = RunStatus.SUSPENDED,
        idle_suspensions: int = 0,
    ) -> RunState:
        def change(run: RunState, now: float) -> RunState:
            return rules.apply_release(
                run,
                epoch=epoch,
                status=status,
                now=now,
                idle_suspensions=idle_suspensions,
                sweep_grace=self._grace,
            )

        def applied(run: RunState) -> bool:
            return rules.release_applied(run, epoch=epoch, status=status)

        return await self._update_leased(run_id, worker, epoch, change, applied)

    async def finish_run(
        self,
        run_id: str,
        *,
        worker: str,
        epoch: int,
        status: RunStatus,
        error: ClassifiedError | None = None,
    ) -> RunState:
        def change(run: RunState, now: float) -> RunState:
            released = Lease(None, epoch, 0.0)
            if run.status.terminal:
                # Already ended (cancelled by the API): that outcome stands.
                return run.with_(lease=released, updated_at=now, sweep_at=None)
            return run.with_(
                lease=released, status=status, error=error, updated_at=now, sweep_at=None
            )

        def applied(run: RunState) -> bool:
            return rules.release_applied(run, epoch=epoch, status=status)

        return await self._update_leased(run_id, worker, epoch, change, applied)

    async def cancel_run(self, run_id: str) -> RunState:
        async with self._lock:
            run = await self.get_run(run_id)
            if run.status.terminal:
                return run
            cancelled = run.with_(
                status=RunStatus.CANCELLED, updated_at=self._clock(), sweep_at=None
            )
            self._runs[run_id] = cancelled
            return cancelled

    async def commit_turn(self, commit: TurnCommit) -> CommitResult:
        async with self._lock:
            run = self._runs.get(commit.run_id)
            thread = self._threads.get(commit.thread_id)
            stored = self._messages.get(commit.thread_id, {})
            message_reasons = [
                ItemReason(CONDITION_FAILED, stored[seq]) if seq in stored else ItemReason(None)
                for seq in rules.message_positions(commit)
            ]
            run_ok = run is not None and rules.commit_condition_holds(run, commit)
            thread_ok = thread is not None and thread.message_count == commit.expected_message_count
            if all(r.code is None for r in message_reasons) and run_ok and thread_ok:
                now = self._clock()
                for seq, message in zip(
                    rules.message_positions(commit), commit.messages, strict=True
                ):
                    stored[seq] = StoredMessage(seq, message, commit.commit_id)
                assert thread is not None
                self._threads[commit.thread_id] = dataclasses.replace(
                    thread, message_count=thread.message_count + len(commit.messages)
                )
                new_run = rules.apply_commit(commit, now=now)
                self._runs[commit.run_id] = new_run
                return CommitResult(new_run)
            diagnosis = diagnose_commit(
                commit,
                messages=message_reasons,
                run=ItemReason(None) if run_ok else ItemReason(CONDITION_FAILED, run),
                thread=ItemReason(None) if thread_ok else ItemReason(CONDITION_FAILED),
            )
            if diagnosis.verdict == Verdict.DUPLICATE and run is not None:
                return CommitResult(run, duplicate=True)
            if diagnosis.verdict == Verdict.FENCED:
                raise CommitFenced(diagnosis.detail)
            if diagnosis.verdict == Verdict.MOVED_ON:
                raise ThreadMovedOn(diagnosis.detail)
            raise ThreadStoreError(diagnosis.detail)

    async def claim_tool_call(
        self, run_id: str, tool_use_id: str, *, name: str, epoch: int
    ) -> tuple[ToolCallRecord, bool]:
        async with self._lock:
            run = await self.get_run(run_id)
            if run.lease.epoch != epoch:
                raise LeaseLost(f"run {run_id} is at epoch {run.lease.epoch}, not {epoch}")
            existing = self._tools.get((run_id, tool_use_id))
            if existing is not None:
                return existing, False
            record = ToolCallRecord(run_id, tool_use_id, name, ToolCallStatus.CLAIMED, epoch)
            self._tools[(run_id, tool_use_id)] = record
            return record, True

    async def reclaim_tool_call(
        self, run_id: str, tool_use_id: str, *, epoch: int, previous_epoch: int
    ) -> ToolCallRecord:
        async with self._lock:
            run = await self.get_run(run_id)
            if run.lease.epoch != epoch:
                raise LeaseLost(f"run {run_id} is at epoch {run.lease.epoch}, not {epoch}")
            record = self._tools.get((run_id, tool_use_id))
            if record is not None and rules.tool_reclaim_applied(record, epoch=epoch):
                return record
            if record is None or not rules.can_reclaim_tool(record, previous_epoch=previous_epoch):
                raise ToolCallConflict(
                    f"tool call {tool_use_id} is no longer held by epoch {previous_epoch}"
                )
            taken = ToolCallRecord(
                run_id,
                tool_use_id,
                record.name,
                ToolCallStatus.CLAIMED,
                epoch,
                attempts=record.attempts + 1,
            )
            self._tools[(run_id, tool_use_id)] = taken
            return taken

    async def finish_tool_call(
        self, run_id: str, tool_use_id: str, *, epoch: int, content: str, is_error: bool
    ) -> ToolCallRecord:
        async with self._lock:
            record = self._tools.get((run_id, tool_use_id))
            if record is not None and rules.tool_finish_applied(
                record, epoch=epoch, content=content, is_error=is_error
            ):
                return record
            if record is None or not rules.can_finish_tool(record, epoch=epoch):
                raise ToolCallConflict(f"tool call {tool_use_id} is not held by epoch {epoch}")
            done = ToolCallRecord(
                run_id,
                tool_use_id,
                record.name,
                ToolCallStatus.FINISHED,
                epoch,
                attempts=record.attempts,
                content=content,
                is_error=is_error,
            )
            self._tools[(run_id, tool_use_id)] = done
            return done

    async def get_tool_call(self, run_id: str, tool_use_id: str) -> ToolCallRecord | None:
        return self._tools.get((run_id, tool_use_id))

    # -- the sweeper

    async def stalled_runs(self, *, now: float, limit: int = 100) -> list[str]:
        due = sorted(
            (run.sweep_at, run.run_id)
            for run in self._runs.values()
            if run.sweep_at is not None and run.sweep_at <= now
        )
        return [run_id for _, run_id in due[:limit]]

    async def mark_rescued(
        self, run: RunState, *, rescues: int, fruitless: int, now: float, next_in: float
    ) -> RunState:
        def change(stored: RunState) -> RunState:
            return stored.with_(
                rescues=rescues,
                fruitless_rescues=fruitless,
                rescue_mark=stored.message_count,
                rescue_epoch=stored.lease.epoch,
                sweep_at=now + next_in,
                updated_at=now,
            )

        return await self._sweep_write(run, now, change)

    async def abandon_run(self, run: RunState, *, error: ClassifiedError, now: float) -> RunState:
        def change(stored: RunState) -> RunState:
            return stored.with_(
                status=RunStatus.FAILED,
                error=error,
                lease=Lease(None, stored.lease.epoch, 0.0),
                sweep_at=None,
                updated_at=now,
            )

        return await self._sweep_write(run, now, change)

    async def _sweep_write(
        self, run: RunState, now: float, change: Callable[[RunState], RunState]
    ) -> RunState:
        async with self._lock:
            stored = await self.get_run(run.run_id)
            if not rules.sweep_holds(stored, run, now=now):
                raise RunChanged(f"run {run.run_id} changed since the sweeper read it")
            updated = change(stored)
            self._runs[run.run_id] = updated
            return updated
