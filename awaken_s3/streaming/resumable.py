"""A resumable turn for one's own loop: open it, iterate its events, commit, let it clean up.

::

    turn = open_turn(store, "run-42", provider, request)
    async for event in turn:          # TurnResumed first on a resume, then text and tool calls
        show(event)
    outcome = turn.outcome            # TurnCompleted, TurnSuspended, TurnFailed or TurnFenced
    await turn.commit(history.append) # save the whole turn, then the checkpoint is deleted

The same :class:`~awaken_s3.streaming.runner.TurnRunner` the service runs drives the turn; this
is only its face for a caller without a run record. The ``key`` names the checkpoint (one
object per key), so a process that runs the same turn again after a crash finds it and
resumes with R1-R4.

Fencing without a lease: each opening writes under a writer id of its own and, unless the
caller holds a lease (``epoch=``), under the epoch one above the checkpoint it found. Every put
is conditional on the last version this writer saw, so once a resumed writer has written, the
one before it (a process thought dead that is not) loses its next put and stops writing.
Exactly-once commit is the caller's: pass ``turn=`` (the model turns already in the history),
so a checkpoint left by a crash between a commit and its delete is recognised as stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any

from awaken_s3.errors import AwakenError
from awaken_s3.messages import Message
from awaken_s3.models import StoredCheckpoint
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.cleanup import delete_checkpoint, delete_turn_checkpoint
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.outcome import TurnCompleted, TurnOutcome
from awaken_s3.streaming.provider import ModelRequest, Provider
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.streaming.turn_events import TurnEvent
from awaken_s3.streaming.turn_request import NOT_LOADED, OwnerCheck, TurnRequest, _NotLoaded

#: what :meth:`ResumableTurn.commit` calls with the whole turn (sync or async)
Save = Callable[[Message], Awaitable[Any] | Any]
#: ``open_turn(existing=...)``: the checkpoint the caller already read under the key (None:
#: nothing is there), or NOT_LOADED (the turn reads it itself)
Existing = StoredCheckpoint | None | _NotLoaded


class TurnNotCompleted(AwakenError, RuntimeError):
    """:meth:`ResumableTurn.commit` was called on a turn that did not complete."""


class ResumableTurn:
    """One model turn, checkpointed under ``key``; iterate it once (or await
    :meth:`result`), then :meth:`commit` or :meth:`discard`."""

    def __init__(
        self,
        runner: TurnRunner,
        request: TurnRequest,
    ) -> None:
        self._runner = runner
        self._request = request
        self._task: asyncio.Task[TurnOutcome] | None = None
        self._events: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
        self._iterated = False
        #: the outcome, once the turn ended
        self.outcome: TurnOutcome | None = None

    @property
    def key(self) -> str:
        return self._request.run_id

    @property
    def writer_id(self) -> str:
        return self._runner.writer_id

    def _start(self) -> asyncio.Task[TurnOutcome]:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        return self._task

    async def _run(self) -> TurnOutcome:
        try:
            outcome = await self._runner.run_turn(self._request, observer=self._events.put_nowait)
        finally:
            self._events.put_nowait(None)
        self.outcome = outcome
        return outcome

    def __aiter__(self) -> AsyncIterator[TurnEvent]:
        if self._iterated:
            raise RuntimeError("a ResumableTurn is iterated once")
        self._iterated = True
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[TurnEvent]:
        task = self._start()
        try:
            while True:
                event = await self._events.get()
                if event is None:
                    break
                yield event
            await task  # re-raises what ended the turn (a bug, a cancellation)
        finally:
            if not task.done():
                # The caller stopped listening: the turn stops as a crash would, its
                # checkpoint kept for a later opening.
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def result(self) -> TurnOutcome:
        """Run the turn to its end (its events are dropped unless iterated) and return its
        outcome. Cancelling the caller stops the turn, its checkpoint kept (like a crash)."""
        if self.outcome is not None:
            return self.outcome
        return await self._start()

    def __await__(self) -> Generator[Any, None, TurnOutcome]:
        return self.result().__await__()

    async def commit(self, save: Save) -> Message:
        """Hand the whole turn to ``save`` (your history: a list's ``append``, a database
        write), then delete the checkpoint. Returns the committed message.

        ``save`` runs first: if it raises, the checkpoint stays and a rerun resumes the
        turn again (nothing is lost). A failed delete is only logged: the checkpoint left
        is stale for the next turn (``turn=`` one higher) and is replaced."""
        outcome = await self.result()
        if not isinstance(outcome, TurnCompleted):
            raise TurnNotCompleted(f"the turn ended {outcome.kind}, there is nothing to commit")
        saved = save(outcome.message)
        if inspect.isawaitable(saved):
            await saved
        await self._delete_turn_checkpoint(outcome)
        return outcome.message

    async def discard(self) -> None:
        """Give the turn up: delete its checkpoint (after a failure you will not retry)."""
        outcome = await self.result()
        version = getattr(outcome, "checkpoint_version", None)
        if isinstance(outcome, TurnCompleted):
            await self._delete_turn_checkpoint(outcome)
        elif version is not None:
            await delete_checkpoint(self._runner.store, self._request.run_id, version)

    async def _delete_turn_checkpoint(self, outcome: TurnCompleted) -> None:
        job = self._request
        await delete_turn_checkpoint(
            self._runner.store, job.run_id, job.turn, outcome, thread_id=job.thread_id
        )


def open_turn(
    store: StreamCheckpointStore,
    key: str,
    provider: Provider,
    request: ModelRequest,
    *,
    turn: int = 0,
    thread_id: str | None = None,
    epoch: int | None = None,
    confirm_owner: OwnerCheck | None = None,
    deadline: float | None = None,
    writer_id: str | None = None,
    retry_policy: RetryPolicy | None = None,
    checkpoint_policy: CheckpointPolicy | None = None,
    existing: Existing = NOT_LOADED,
) -> ResumableTurn:
    """A resumable model turn checkpointed in ``store`` under ``key``.

    ``request`` holds the committed history and the model settings (never a prefix: the
    turn builds continuation requests itself). ``turn`` is the number of model turns already
    in that history. ``epoch`` is a lease epoch you hold (then ``confirm_owner`` may say
    whether it still does); without one, fencing rests on the store's conditional writes.
    ``deadline`` is a ``time.monotonic()`` instant by which the turn suspends (flushing the
    checkpoint) instead of running on. Nothing runs until the turn is iterated or awaited.
    """
    runner = TurnRunner(
        provider,
        store,
        writer_id=writer_id or f"turn-{uuid.uuid4().hex}",
        retry_policy=retry_policy,
        checkpoint_policy=checkpoint_policy,
    )
    job = TurnRequest(
        run_id=key,
        thread_id=thread_id or key,
        turn=turn,
        epoch=epoch if epoch is not None else 0,
        request=request,
        deadline=deadline,
        confirm_owner=confirm_owner,
        leased=epoch is not None,
        existing=existing,
    )
    return ResumableTurn(runner, job)
