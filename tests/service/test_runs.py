"""The HTTP API's rules (awaken_s3.service.runs) against the in-memory store: no events, no
AWS. What a caller may do, and the status and code it gets when it may not."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from awaken_s3.models import StreamCheckpoint
from awaken_s3.service import runs
from awaken_s3.service.queue import RunMessage
from awaken_s3.service.runs import ApiError
from awaken_s3.service.scoping import scoped_id
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.cancel_mark import Mark
from awaken_s3.streaming.fence import CANCEL_WRITER
from awaken_s3.threads import InMemoryThreadStore, RunSettings, RunStatus
from tests.fixtures.clock import FakeClock

SETTINGS = RunSettings(model="m1")
ALICE, MALLORY = "alice", "mallory"


class Outbox:
    def __init__(self) -> None:
        self.sent: list[RunMessage] = []

    async def __call__(self, message: RunMessage) -> object:
        self.sent.append(message)
        return "id"


async def start(
    store: InMemoryThreadStore,
    outbox: Outbox,
    *,
    owner: str = ALICE,
    thread: str = "t1",
    run: str = "r1",
    message: str = "hello",
) -> object:
    return await runs.start_run(
        store,
        outbox,
        owner=owner,
        public_thread=thread,
        public_run=run,
        settings=SETTINGS,
        message=message,
    )


def refused(exc: pytest.ExceptionInfo[ApiError]) -> tuple[HTTPStatus, str]:
    return exc.value.status, exc.value.code


async def test_a_thread_create_is_idempotent_but_bound_to_its_metadata() -> None:
    store = InMemoryThreadStore()
    thread, created = await runs.create_thread(store, owner=ALICE, public="t1", metadata={"a": "1"})
    again, created_again = await runs.create_thread(
        store, owner=ALICE, public="t1", metadata={"a": "1"}
    )
    assert (created, created_again, again.thread_id) == (True, False, thread.thread_id)
    with pytest.raises(ApiError) as exc:
        await runs.create_thread(store, owner=ALICE, public="t1", metadata={"a": "2"})
    assert refused(exc) == (HTTPStatus.CONFLICT, "thread_exists")


async def test_another_caller_s_ids_are_free_for_everyone_else() -> None:
    store = InMemoryThreadStore()
    await runs.create_thread(store, owner=ALICE, public="t1", metadata={})
    # The same public id is another thread for another caller: no 409 leaks that it exists.
    _, created = await runs.create_thread(store, owner=MALLORY, public="t1", metadata={})
    assert created
    outbox = Outbox()
    await start(store, outbox)
    with pytest.raises(ApiError) as exc:
        await runs.owned_run(store, owner=MALLORY, public="r1")
    assert refused(exc) == (HTTPStatus.NOT_FOUND, "not_found")
    with pytest.raises(ApiError) as exc:
        await runs.cancel_run(store, owner=MALLORY, public="r1")
    assert refused(exc) == (HTTPStatus.NOT_FOUND, "not_found")
    assert (await runs.owned_run(store, owner=ALICE, public="r1")).status == RunStatus.QUEUED


async def test_a_run_start_sends_its_message_also_on_a_retry_while_queued() -> None:
    store = InMemoryThreadStore()
    await runs.create_thread(store, owner=ALICE, public="t1", metadata={})
    outbox = Outbox()
    await start(store, outbox)
    # The first attempt may have died between the create and the send: a retry sends again
    # (FIFO deduplicates the repeat), and appends nothing twice.
    await start(store, outbox)
    stored = scoped_id(ALICE, "r1")
    assert outbox.sent == [RunMessage(run_id=stored, reason="start")] * 2
    _, messages = await runs.thread_with_messages(store, owner=ALICE, public="t1")
    assert [m.text for m in messages] == ["hello"]
    with pytest.raises(ApiError) as exc:
        await start(store, outbox, message="something else")
    assert refused(exc) == (HTTPStatus.CONFLICT, "run_exists")


async def test_one_live_run_per_thread_names_the_active_run_as_the_caller_knows_it() -> None:
    store = InMemoryThreadStore()
    await runs.create_thread(store, owner=ALICE, public="t1", metadata={})
    outbox = Outbox()
    await start(store, outbox)
    with pytest.raises(ApiError) as exc:
        await start(store, outbox, run="r2", message="second")
    assert refused(exc) == (HTTPStatus.CONFLICT, "run_active")
    assert exc.value.details == [{"run_id": "r1"}]
    assert (
        await runs.cancel_run(store, owner=ALICE, public="r1")
    ).run.status == RunStatus.CANCELLED
    await start(store, outbox, run="r2", message="second")
    assert len(outbox.sent) == 2


async def test_a_run_on_a_missing_thread_is_not_found_and_sends_nothing() -> None:
    store = InMemoryThreadStore()
    outbox = Outbox()
    with pytest.raises(ApiError) as exc:
        await start(store, outbox, thread="nope")
    assert refused(exc) == (HTTPStatus.NOT_FOUND, "not_found")
    assert outbox.sent == []


# -- a cancel: who is signalled, who tells the followers -----------------------------------


async def cancel_in(state: str) -> tuple[runs.Cancel, InMemoryStreamCheckpointStore]:
    """Cancel alice's run r1 in ``state``: queued, held (a live lease), expired (a lease
    that ran out), ended (finished before the cancel) or quiet (held, mark switched off)."""
    clock = FakeClock()
    store, checkpoints = InMemoryThreadStore(clock=clock), InMemoryStreamCheckpointStore()
    await runs.create_thread(store, owner=ALICE, public="t1", metadata={})
    await start(store, Outbox())
    run_id = scoped_id(ALICE, "r1")
    if state != "queued":
        claimed = await store.claim_run(run_id, worker="w1", lease_seconds=30)
        if state == "expired":
            clock.advance(31)
        if state == "ended":
            await store.finish_run(
                run_id, worker="w1", epoch=claimed.lease.epoch, status=RunStatus.COMPLETED
            )
    done = await runs.cancel_run(
        store,
        owner=ALICE,
        public="r1",
        checkpoints=checkpoints,
        signal=state != "quiet",
        clock=clock,
    )
    return done, checkpoints


@pytest.mark.parametrize(
    ("state", "status", "worker_tells", "caller_tells", "mark"),
    [
        ("queued", RunStatus.CANCELLED, False, True, None),
        ("expired", RunStatus.CANCELLED, False, True, None),
        ("held", RunStatus.CANCELLED, True, False, Mark.MARKED),
        ("quiet", RunStatus.CANCELLED, True, False, None),
        ("ended", RunStatus.COMPLETED, False, False, None),
    ],
)
async def test_a_cancel_signals_a_live_worker_and_leaves_it_the_end(
    state: str, status: RunStatus, worker_tells: bool, caller_tells: bool, mark: Mark | None
) -> None:
    done, checkpoints = await cancel_in(state)
    assert (done.run.status, done.worker_tells, done.caller_tells, done.mark) == (
        status,
        worker_tells,
        caller_tells,
        mark,
    )
    stored = await checkpoints.get(scoped_id(ALICE, "r1"))
    if mark is None:
        assert stored is None, "nothing marked where no live worker streams"
    else:
        # No checkpoint yet: an empty one is created for the run's turn and lease epoch, so
        # the worker's first put (a create) is refused.
        assert stored is not None
        assert (stored.checkpoint.writer, stored.checkpoint.partial_text) == (CANCEL_WRITER, "")
        assert (stored.checkpoint.turn, stored.checkpoint.epoch) == (0, done.run.lease.epoch)


async def test_the_mark_puts_the_stored_body_again_with_only_its_writer_changed() -> None:
    clock = FakeClock()
    store, checkpoints = InMemoryThreadStore(clock=clock), InMemoryStreamCheckpointStore()
    await runs.create_thread(store, owner=ALICE, public="t1", metadata={})
    await start(store, Outbox())
    run_id = scoped_id(ALICE, "r1")
    claimed = await store.claim_run(run_id, worker="w1", lease_seconds=30)
    written = StreamCheckpoint(
        run_id=run_id,
        thread_id=claimed.thread_id,
        model="m1",
        turn=0,
        partial_text="half an answ",
        epoch=claimed.lease.epoch,
        writer="w1",
    )
    version = await checkpoints.put(written, expected_version=None)
    done = await runs.cancel_run(
        store, owner=ALICE, public="r1", checkpoints=checkpoints, clock=clock
    )
    assert done.mark is Mark.MARKED
    stored = await checkpoints.get(run_id)
    assert stored is not None and stored.version != version
    assert stored.checkpoint == written.model_copy(update={"writer": CANCEL_WRITER})
    # A repeated cancel finds the run ended by the first: nothing more is marked or told.
    again = await runs.cancel_run(
        store, owner=ALICE, public="r1", checkpoints=checkpoints, clock=clock
    )
    assert (again.landed, again.mark, again.caller_tells) == (False, None, False)
