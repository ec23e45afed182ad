"""What a caller of the HTTP API may do with threads and runs: the rules, over any run store.

Each function takes the caller's identity and its own (public) ids, works in the caller's
namespace (:mod:`awaken_s3.service.scoping`), and raises :class:`ApiError` with the status and
code a caller sees. Nothing here knows about events, headers or bodies (that is
:mod:`awaken_s3.service.http`), so the rules are tested against the in-memory store:

* a thread create is idempotent per id, but bound to its content: the same id with other
  metadata is a conflict, never the old thread answered silently;
* a run create is idempotent per run id and bound to its request (message and settings); the
  start message is sent on every create that finds the run still queued, because the first
  attempt may have died between the create and the send (FIFO deduplicates the repeat);
* one live run per thread (409 ``run_active`` names the active one);
* another caller's thread or run answers exactly like a missing one;
* what a run may set of its agent is the agent's decision (:mod:`awaken_s3.agents`);
* a cancel reaches the worker streaming the run through its checkpoint, and whoever drives
  the run last tells its followers that it ended (:func:`cancel_run`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from awaken_s3.errors import AwakenError
from awaken_s3.messages import Message
from awaken_s3.service.queue import RunMessage
from awaken_s3.service.scoping import public_id, scoped_id
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.cancel_mark import Mark, mark_cancelled
from awaken_s3.threads.base import RunStore
from awaken_s3.threads.errors import (
    RunActive,
    RunExists,
    RunNotFound,
    ThreadExists,
    ThreadMovedOn,
    ThreadNotFound,
)
from awaken_s3.threads.models import RunSettings, RunState, RunStatus, Thread

#: sends a run's start message to the queue
SendStart = Callable[[RunMessage], Awaitable[object]]


class ApiError(AwakenError):
    """A request refused with ``status``, a stable ``code`` and a text for the caller."""

    def __init__(
        self,
        status: HTTPStatus,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def not_found(kind: str, ident: str) -> ApiError:
    return ApiError(HTTPStatus.NOT_FOUND, "not_found", f"{kind} {ident} not found")


async def create_thread(
    threads: RunStore, *, owner: str, public: str, metadata: Mapping[str, str]
) -> tuple[Thread, bool]:
    """The thread and whether this call created it (False: a retry of the same create)."""
    thread_id = scoped_id(owner, public)
    try:
        return await threads.create_thread(thread_id, owner=owner, metadata=metadata), True
    except ThreadExists as exc:
        # The id is in the caller's own namespace: this is the caller's thread.
        try:
            existing: Thread | None = await threads.get_thread(thread_id, owner=owner)
        except ThreadNotFound:
            existing = None
        if existing is None or dict(existing.metadata) != dict(metadata):
            # Not a retry of the same request: answering it with the old thread would
            # silently drop the new metadata.
            raise ApiError(
                HTTPStatus.CONFLICT, "thread_exists", f"thread {public} exists with other metadata"
            ) from exc
        return existing, False


async def thread_with_messages(
    threads: RunStore, *, owner: str, public: str
) -> tuple[Thread, list[Message]]:
    thread_id = scoped_id(owner, public)
    try:
        thread = await threads.get_thread(thread_id, owner=owner)
    except ThreadNotFound as exc:
        raise not_found("thread", public) from exc
    return thread, await threads.load_messages(thread_id)


async def owned_run(threads: RunStore, *, owner: str, public: str) -> RunState:
    try:
        run = await threads.get_run(scoped_id(owner, public))
    except RunNotFound as exc:
        raise not_found("run", public) from exc
    # The namespace already keeps other callers out; the stored owner is checked anyway.
    if run.owner != owner:
        raise not_found("run", public)
    return run


async def start_run(
    threads: RunStore,
    send: SendStart,
    *,
    owner: str,
    public_thread: str,
    public_run: str,
    settings: RunSettings,
    message: str,
) -> RunState:
    """Create the run (appending the caller's message) and send its start message."""
    run_id = scoped_id(owner, public_run)
    try:
        run = await threads.create_run(
            run_id,
            thread_id=scoped_id(owner, public_thread),
            owner=owner,
            settings=settings,
            messages=[Message.user(message)],
        )
    except ThreadNotFound as exc:
        raise not_found("thread", public_thread) from exc
    except RunExists as exc:
        raise ApiError(
            HTTPStatus.CONFLICT,
            "run_exists",
            f"run {public_run} exists with another message or settings",
        ) from exc
    except RunActive as exc:
        # One live run per thread: a second would race the first for the thread's next
        # message positions and one of them would fail later with thread_moved_on.
        # The thread is the caller's, so its active run is too: name it as the caller does.
        raise ApiError(
            HTTPStatus.CONFLICT,
            "run_active",
            f"thread {public_thread} has an active run; wait for it to end or cancel it",
            [{"run_id": public_id(owner, exc.run_id)}],
        ) from exc
    except ThreadMovedOn as exc:
        raise ApiError(
            HTTPStatus.CONFLICT, "thread_changed", f"thread {public_thread} changed; retry"
        ) from exc
    if run.owner != owner:
        raise ApiError(HTTPStatus.CONFLICT, "run_exists", f"run id {public_run} is taken")
    if run.status == RunStatus.QUEUED:
        # Also on a retry: the first attempt may have failed between create and send.
        # The deduplication id makes a repeated send within 5 minutes a no-op on FIFO.
        await send(RunMessage(run_id=run_id, reason="start"))
    return run


@dataclass(frozen=True, slots=True)
class Cancel:
    """What a cancel did: the run as it stands, and who tells its followers that it ended."""

    run: RunState
    #: True: this cancel ended the run while a live worker held its lease. That worker stops
    #: (the mark below reaches it within a checkpoint put interval, its next lease renewal at
    #: the latest) and tells the followers itself: the last durable text, then ``run_ended``,
    #: from one sender, so nothing follows the end.
    worker_tells: bool
    #: this call's cancel is what ended the run (False: it had ended before, and whoever
    #: ended it tells the followers; a worker that just finished may still be pushing)
    landed: bool = True
    #: what became of the cancel's mark on the run's checkpoint (None: not tried)
    mark: Mark | None = None

    @property
    def caller_tells(self) -> bool:
        """The caller tells the followers: the cancel ended a run no live worker drives."""
        return self.landed and not self.worker_tells


async def cancel_run(
    threads: RunStore,
    *,
    owner: str,
    public: str,
    checkpoints: StreamCheckpointStore | None = None,
    signal: bool = True,
    clock: Callable[[], float] = time.time,
) -> Cancel:
    """Cancel the caller's run; a run that already ended answers with its final state.

    When the cancel lands on a run a live worker holds, the run's checkpoint is marked
    (:func:`~awaken_s3.streaming.cancel_mark.mark_cancelled`: same body, another version)
    so the worker's next conditional put is refused and its lease check finds the cancel:
    the tokens stop within about a put interval instead of a renewal interval. ``signal``
    False leaves the worker to its renewal (the benchmark's comparison). Both the HTTP route
    and the WebSocket ``cancel`` action call this."""
    before = await owned_run(threads, owner=owner, public=public)
    run = await threads.cancel_run(scoped_id(owner, public))
    landed = not before.status.terminal and run.status == RunStatus.CANCELLED
    held = run.lease.owner is not None and run.lease.lease_until > clock()
    if not (landed and held):
        return Cancel(run, worker_tells=False, landed=landed)
    mark = None
    if signal and checkpoints is not None:
        # After the cancel, never before: the worker's lease check must find the run cancelled.
        mark = await mark_cancelled(checkpoints, run)
    return Cancel(run, worker_tells=True, mark=mark)
