"""Threads, messages, runs and their lease, over a backend's primitives (one algorithm for
every backend: :mod:`awaken_s3.threads.backend`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from boto3.dynamodb.conditions import ConditionBase

from awaken_s3.ids import validate_run_id, validate_thread_id
from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import codec, rules, writes
from awaken_s3.threads import conditions as cond
from awaken_s3.threads.backend import StoreIO
from awaken_s3.threads.cancellation import CONDITION_FAILED
from awaken_s3.threads.errors import (
    LeaseLost,
    LeaseUnavailable,
    RunActive,
    RunExists,
    RunNotFound,
    ThreadExists,
    ThreadMovedOn,
    ThreadNotFound,
    ThreadStoreError,
)
from awaken_s3.threads.evaluate import holds
from awaken_s3.threads.models import RunSettings, RunState, RunStatus, Thread


class _RunEnded(ThreadStoreError):
    """A lease write whose lease still held found the run ended (or, for a renewal, the
    lease run out): the caller decides what that means. Never leaves the store."""

    def __init__(self, run: RunState) -> None:
        super().__init__(run.run_id)
        self.run = run


class RunOperations(StoreIO):
    """The :class:`~awaken_s3.threads.base.RunStore` operations."""

    async def create_thread(
        self, thread_id: str, *, owner: str, metadata: Mapping[str, str] | None = None
    ) -> Thread:
        validate_thread_id(thread_id)
        thread = Thread(thread_id, owner, 0, self._clock(), dict(metadata or {}))
        written = await self._write(
            writes.create_thread(thread), action=f"create_thread {thread_id}"
        )
        if not written.applied:
            raise ThreadExists(f"thread {thread_id} already exists")
        return thread

    async def get_thread(self, thread_id: str, *, owner: str | None = None) -> Thread:
        validate_thread_id(thread_id)
        item = await self._get(codec.thread_key(thread_id), action=f"get_thread {thread_id}")
        thread = None if item is None else codec.thread_of(item)
        if thread is None or (owner is not None and thread.owner != owner):
            raise ThreadNotFound(f"thread {thread_id} not found")
        return thread

    async def load_messages(self, thread_id: str) -> list[Message]:
        validate_thread_id(thread_id)
        items = await self._query(writes.messages(thread_id), action=f"load_messages {thread_id}")
        messages = []
        for item in items:
            stored = await self._message_of(item)
            assert stored.message is not None
            messages.append(stored.message)
        return messages

    async def get_run(self, run_id: str) -> RunState:
        validate_run_id(run_id)
        item = await self._get(codec.run_key(run_id), action=f"get_run {run_id}")
        if item is None:
            raise RunNotFound(f"run {run_id} not found")
        return await self._run_of(item)

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
        thread = await self.get_thread(thread_id, owner=owner)
        await self._refuse_beside_active(thread, run_id)
        now = self._clock()
        digest = rules.run_request_digest(settings, messages)
        run = RunState(
            run_id=run_id,
            thread_id=thread_id,
            owner=owner,
            settings=settings,
            message_count=thread.message_count + len(messages),
            created_at=now,
            updated_at=now,
            sweep_at=now + self._grace,
            request_digest=digest,
        )
        items = await self._message_items(
            thread_id, thread.message_count, messages, f"create/{run_id}"
        )
        transaction = writes.create_run(
            run, items, old_count=thread.message_count, previous_active=thread.active_run
        )
        action = f"create_run {run_id}"
        cancelled = await self._transact(transaction, action=action)
        if cancelled is None:
            if codec.system_apart(settings) and settings.system is not None:
                self._remember_prompt(run_id, settings.system)
            return run
        if cancelled.failed(0):
            # The run id is taken: by this very request (an API retry), or by another.
            existing = await self.get_run(run_id)
            same = rules.same_run_request(
                existing, thread_id=thread_id, owner=owner, settings=settings, request_digest=digest
            )
            if same:
                return existing
            raise RunExists(f"run {run_id} already exists")
        if CONDITION_FAILED in cancelled.codes or "TransactionConflict" in cancelled.codes:
            raise ThreadMovedOn(f"thread {thread_id} changed while creating run {run_id}")
        raise self._cancelled(cancelled, action=action)

    async def _refuse_beside_active(self, thread: Thread, run_id: str) -> None:
        """One live run per thread: two would race for its next message positions."""
        if thread.active_run is None or thread.active_run == run_id:
            return
        try:
            active: RunState | None = await self.get_run(thread.active_run)
        except RunNotFound:
            active = None
        if rules.active_run_blocks(active, run_id):
            raise RunActive(
                f"thread {thread.thread_id} has an active run {thread.active_run}",
                run_id=thread.active_run,
            )

    async def claim_run(self, run_id: str, *, worker: str, lease_seconds: float) -> RunState:
        validate_run_id(run_id)
        claim = writes.claim(
            run_id, worker=worker, now=self._clock(), lease_seconds=lease_seconds, grace=self._grace
        )
        written = await self._write(claim, action=f"claim_run {run_id}")
        if written.item is None:
            raise RunNotFound(f"run {run_id} not found")
        current = await self._run_of(written.item)
        if not written.applied:
            raise LeaseUnavailable(
                f"run {run_id} is {current.status.value}, leased by {current.lease.owner!r} "
                f"until {current.lease.lease_until:.3f}"
            )
        return current

    async def _update_leased(
        self,
        update: writes.Update,
        *,
        worker: str,
        epoch: int,
        applied: ConditionBase | None = None,
    ) -> RunState:
        """An update that holds only while ``worker`` at ``epoch`` holds the lease. Raises
        :class:`_RunEnded` when the lease still holds but the rest of the condition failed;
        answers the stored run when it shows ``applied`` (an earlier attempt of this write,
        whose response was lost, did it)."""
        run_id = codec.run_id_of(update.key)
        written = await self._write(update, action=f"update of run {run_id}")
        if written.item is None:
            raise RunNotFound(f"run {run_id} not found")
        current = await self._run_of(written.item)
        if written.applied:
            return current
        if holds(cond.lease_held(worker, epoch), written.item):
            raise _RunEnded(current)
        if applied is not None and holds(applied, written.item):
            return current
        raise LeaseLost(
            f"run {run_id} is leased by {current.lease.owner!r} at epoch "
            f"{current.lease.epoch}, not {worker!r} at {epoch}"
        )

    async def renew_lease(
        self, run_id: str, *, worker: str, epoch: int, lease_seconds: float
    ) -> RunState:
        validate_run_id(run_id)
        renewal = writes.renew(
            run_id,
            worker=worker,
            epoch=epoch,
            now=self._clock(),
            lease_seconds=lease_seconds,
            grace=self._grace,
        )
        try:
            return await self._update_leased(renewal, worker=worker, epoch=epoch)
        except _RunEnded as refused:
            # Still our lease, so what failed is the lease being live: it ran out.
            raise LeaseLost(rules.expired_lease(refused.run, epoch)) from None

    async def release_lease(
        self,
        run_id: str,
        *,
        worker: str,
        epoch: int,
        status: RunStatus = RunStatus.SUSPENDED,
        idle_suspensions: int = 0,
    ) -> RunState:
        validate_run_id(run_id)
        release = writes.release(
            run_id,
            worker=worker,
            epoch=epoch,
            now=self._clock(),
            status=status,
            idle_suspensions=idle_suspensions,
            grace=self._grace,
        )
        return await self._end_lease(release, worker=worker, epoch=epoch, status=status)

    async def finish_run(
        self,
        run_id: str,
        *,
        worker: str,
        epoch: int,
        status: RunStatus,
        error: ClassifiedError | None = None,
    ) -> RunState:
        validate_run_id(run_id)
        finish = writes.finish(
            run_id, worker=worker, epoch=epoch, now=self._clock(), status=status, error=error
        )
        return await self._end_lease(finish, worker=worker, epoch=epoch, status=status)

    async def _end_lease(
        self, update: writes.Update, *, worker: str, epoch: int, status: RunStatus
    ) -> RunState:
        """A release or finish. On a run that ended meanwhile (a cancel) the outcome it ended
        with stands: only the lease goes (both do the same, on every backend)."""
        try:
            return await self._update_leased(
                update, worker=worker, epoch=epoch, applied=cond.released_by(epoch, status)
            )
        except _RunEnded:
            run_id = codec.run_id_of(update.key)
            drop = writes.drop_lease(run_id, worker=worker, epoch=epoch, now=self._clock())
            return await self._update_leased(drop, worker=worker, epoch=epoch)

    async def cancel_run(self, run_id: str) -> RunState:
        validate_run_id(run_id)
        cancel = writes.cancel(run_id, now=self._clock())
        written = await self._write(cancel, action=f"cancel_run {run_id}")
        if written.item is None:
            raise RunNotFound(f"run {run_id} not found")
        # Applied, or the run had already ended: either way, the run as it now is.
        return await self._run_of(written.item)
