"""The HTTP API's rules (awaken_s3.service.runs) against the in-memory store: no events, no
AWS. What a caller may do, and the status and code it gets when it may not."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from awaken_s3.service import runs
from awaken_s3.service.queue import RunMessage
from awaken_s3.service.runs import ApiError
from awaken_s3.service.scoping import scoped_id
from awaken_s3.threads import InMemoryThreadStore, RunSettings, RunStatus

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
    assert (await runs.cancel_run(store, owner=ALICE, public="r1")).run.status == RunStatus.CANCELLED
    await start(store, outbox, run="r2", message="second")
    assert len(outbox.sent) == 2


async def test_a_run_on_a_missing_thread_is_not_found_and_sends_nothing() -> None:
    store = InMemoryThreadStore()
    outbox = Outbox()
    with pytest.raises(ApiError) as exc:
        await start(store, outbox, thread="nope")
    assert refused(exc) == (HTTPStatus.NOT_FOUND, "not_found")
    assert outbox.sent == []
