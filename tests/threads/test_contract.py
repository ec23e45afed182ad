"""One contract, every backend: memory, and DynamoDB on the suite's moto server."""

from __future__ import annotations

import dataclasses

import pytest

from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import ClassifiedError, Usage
from awaken_s3.threads import (
    CommitFenced,
    LeaseLost,
    LeaseUnavailable,
    RunActive,
    RunExists,
    RunNotFound,
    RunStatus,
    ThreadExists,
    ThreadMovedOn,
    ThreadNotFound,
    ThreadStore,
    ToolCallConflict,
    ToolCallStatus,
    TurnCommit,
)
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import OWNER, SETTINGS, seed_run
from tests.threads.helpers import DIGEST, assistant_turn, results_commit, tool_turn

LEASE = 30.0


async def test_thread_is_visible_to_its_owner_only(store: ThreadStore) -> None:
    created = await store.create_thread("t1", owner=OWNER, metadata={"title": "demo"})
    thread = await store.get_thread("t1", owner=OWNER)
    assert (thread.owner, thread.message_count, dict(thread.metadata)) == (
        OWNER,
        0,
        {"title": "demo"},
    )
    assert thread.created_at == created.created_at
    with pytest.raises(ThreadNotFound):
        await store.get_thread("t1", owner="mallory")
    with pytest.raises(ThreadNotFound):
        await store.get_thread("nope")
    with pytest.raises(ThreadExists):
        await store.create_thread("t1", owner="mallory")
    assert (await store.get_thread("t1")).owner == OWNER


async def test_create_run_appends_prompt_and_queues(store: ThreadStore) -> None:
    run = await seed_run(store, prompt="hello")
    assert run.status == RunStatus.QUEUED
    assert (run.turn, run.message_count, run.lease.epoch) == (0, 1, 0)
    assert await store.load_messages("t1") == [Message.user("hello")]
    stored = await store.get_run("r1")
    assert stored.settings == SETTINGS
    assert (stored.thread_id, stored.owner, stored.status) == ("t1", OWNER, RunStatus.QUEUED)
    assert (await store.get_thread("t1")).message_count == 1
    # Repeating the same request (an API retry) answers the same run and appends nothing...
    again = await store.create_run(
        "r1", thread_id="t1", owner=OWNER, settings=SETTINGS, messages=[Message.user("hello")]
    )
    assert again == stored and (await store.get_thread("t1")).message_count == 1
    # ... while another request reusing the id is refused.
    with pytest.raises(RunExists):
        await store.create_run(
            "r1", thread_id="t1", owner=OWNER, settings=dataclasses.replace(SETTINGS, model="x")
        )
    with pytest.raises(ThreadNotFound):
        await store.create_run("r2", thread_id="t1", owner="mallory", settings=SETTINGS)
    with pytest.raises(RunNotFound):
        await store.get_run("r404")


async def test_a_retried_create_run_is_bound_to_its_message(store: ThreadStore) -> None:
    await seed_run(store, prompt="transfer 10 EUR to Bob")
    # Same id, same settings, another message: not a retry. Answering it with the old run
    # would silently drop the new message.
    with pytest.raises(RunExists):
        await store.create_run(
            "r1",
            thread_id="t1",
            owner=OWNER,
            settings=SETTINGS,
            messages=[Message.user("transfer 10000 EUR to Bob")],
        )
    assert await store.load_messages("t1") == [Message.user("transfer 10 EUR to Bob")]
    stored = await store.get_run("r1")
    assert stored.request_digest is not None  # survives the backend's encoding
    again = await store.create_run(
        "r1",
        thread_id="t1",
        owner=OWNER,
        settings=SETTINGS,
        messages=[Message.user("transfer 10 EUR to Bob")],
    )
    assert again == stored


async def test_claim_bumps_epoch_and_excludes_others_until_expiry(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)
    first = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    assert first.status == RunStatus.RUNNING
    assert (first.lease.owner, first.lease.epoch) == ("w1", 1)
    assert first.lease.lease_until == pytest.approx(clock.now + LEASE)
    with pytest.raises(LeaseUnavailable):
        await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    again = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    assert again.lease.epoch == 2  # a re-claim still fences the claimer's older incarnation
    clock.advance(LEASE + 1)
    taken = await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    assert (taken.lease.owner, taken.lease.epoch) == ("w2", 3)
    with pytest.raises(RunNotFound):
        await store.claim_run("r404", worker="w1", lease_seconds=LEASE)


async def test_renew_extends_only_the_current_holder(store: ThreadStore, clock: FakeClock) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    clock.advance(20)
    renewed = await store.renew_lease("r1", worker="w1", epoch=run.lease.epoch, lease_seconds=LEASE)
    assert renewed.lease.lease_until == pytest.approx(clock.now + LEASE)
    clock.advance(20)  # past the first lease, inside the renewed one
    with pytest.raises(LeaseUnavailable):
        await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    clock.advance(LEASE)
    await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    with pytest.raises(LeaseLost):
        await store.renew_lease("r1", worker="w1", epoch=run.lease.epoch, lease_seconds=LEASE)


async def test_an_expired_lease_is_never_renewed(store: ThreadStore, clock: FakeClock) -> None:
    # A holder that stalled past its lease (a GC pause, a frozen container) wakes up and tries
    # to renew before anyone claimed the run: refused, so that the delivery its record now
    # makes finds the lease free and claims the run at a new epoch.
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    clock.advance(LEASE)  # exactly at the end: no longer live
    with pytest.raises(LeaseLost, match="ran out"):
        await store.renew_lease("r1", worker="w1", epoch=run.lease.epoch, lease_seconds=LEASE)
    stored = await store.get_run("r1")
    assert stored.lease.lease_until == pytest.approx(run.lease.lease_until)  # untouched
    taken = await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    assert taken.lease.epoch == run.lease.epoch + 1
    # The stalled holder still gives the run up cleanly when the run is still its own...
    clock.advance(LEASE)
    again = await store.claim_run("r1", worker="w3", lease_seconds=LEASE)
    clock.advance(LEASE + 1)
    released = await store.release_lease("r1", worker="w3", epoch=again.lease.epoch)
    assert released.lease.owner is None and released.status == RunStatus.SUSPENDED


async def test_release_lets_the_next_worker_claim_at_once(store: ThreadStore) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    released = await store.release_lease("r1", worker="w1", epoch=run.lease.epoch)
    assert released.status == RunStatus.SUSPENDED
    assert released.lease.owner is None
    taken = await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    assert taken.lease.epoch == run.lease.epoch + 1
    with pytest.raises(LeaseLost):
        await store.release_lease("r1", worker="w1", epoch=run.lease.epoch)


async def test_commit_appends_in_order_and_advances_run(store: ThreadStore) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    expected = [Message.user("hi")]
    # Twelve turns cross the 10-message mark: the zero-padded keys must keep numeric order.
    for i in range(6):
        committed = await store.commit_turn(tool_turn(run, f"call-{i}"))
        assert not committed.duplicate
        run = committed.run
        expected.append(tool_turn(run, f"call-{i}").messages[0])
        run = (await store.commit_turn(results_commit(run, f"call-{i}", str(i)))).run
        expected.append(results_commit(run, f"call-{i}", str(i)).messages[0])
    assert (run.turn, run.message_count) == (6, 13)
    assert run.usage == Usage(18, 24)
    assert await store.load_messages("t1") == expected
    stored = await store.get_run("r1")
    assert (stored.turn, stored.message_count, stored.usage) == (6, 13, Usage(18, 24))
    assert stored.stop_reason == "tool_use"
    assert (await store.get_thread("t1")).message_count == 13


async def test_repeated_commit_is_recognised_not_duplicated(store: ThreadStore) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    commit = assistant_turn(run, "hello there")
    first = await store.commit_turn(commit)
    second = await store.commit_turn(commit)
    assert second.duplicate and not first.duplicate
    assert second.run.turn == 1 and second.run.message_count == 2
    assert await store.load_messages("t1") == [Message.user("hi"), Message.assistant("hello there")]
    assert (await store.get_run("r1")).usage == Usage(10, 5)


async def test_zombie_commit_is_fenced(store: ThreadStore, clock: FakeClock) -> None:
    await seed_run(store)
    zombie = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    clock.advance(LEASE + 1)
    live = await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    with pytest.raises(CommitFenced):
        await store.commit_turn(assistant_turn(zombie, "zombie text"))
    await store.commit_turn(assistant_turn(live, "live text"))
    # Even after the live worker committed that position, the zombie is told it is fenced.
    with pytest.raises(CommitFenced):
        await store.commit_turn(assistant_turn(zombie, "zombie text"))
    assert await store.load_messages("t1") == [Message.user("hi"), Message.assistant("live text")]


async def test_commit_on_a_thread_that_moved_on_is_refused(store: ThreadStore) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    await store.commit_turn(assistant_turn(run, "first"))
    with pytest.raises(ThreadMovedOn):
        await store.commit_turn(assistant_turn(run, "a different first"))
    # A second run is refused while the first has not ended: two live runs would race for
    # the thread's next positions. Once the first ended, the second appends, and the first's
    # stale view can no longer commit.
    with pytest.raises(RunActive) as active:
        await store.create_run("r2", thread_id="t1", owner=OWNER, settings=SETTINGS)
    assert active.value.run_id == "r1"
    await store.cancel_run("r1")
    await store.create_run("r2", thread_id="t1", owner=OWNER, settings=SETTINGS)
    other = await store.claim_run("r2", worker="w9", lease_seconds=LEASE)
    await store.commit_turn(assistant_turn(other, "second run"))
    run1 = await store.get_run("r1")
    with pytest.raises(ThreadMovedOn):
        await store.commit_turn(results_commit(run1, "x", "late"))
    messages = await store.load_messages("t1")
    assert [m.text for m in messages] == ["hi", "first", "second run"]


async def test_cancelled_run_accepts_no_commit_and_stays_cancelled(store: ThreadStore) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    cancelled = await store.cancel_run("r1")
    assert cancelled.status == RunStatus.CANCELLED
    with pytest.raises(ThreadMovedOn):
        await store.commit_turn(assistant_turn(run, "too late"))
    failed = await store.finish_run(
        "r1",
        worker="w1",
        epoch=run.lease.epoch,
        status=RunStatus.FAILED,
        error=ClassifiedError("x", "y", False),
    )
    assert failed.status == RunStatus.CANCELLED and failed.error is None
    assert failed.lease.owner is None
    with pytest.raises(LeaseUnavailable):
        await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    assert await store.load_messages("t1") == [Message.user("hi")]
    assert (await store.cancel_run("r1")).status == RunStatus.CANCELLED


async def test_final_commit_completes_and_releases(store: ThreadStore) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    commit = TurnCommit(
        base=run,
        messages=(Message.assistant("done"),),
        stop_reason="end_turn",
        final_status=RunStatus.COMPLETED,
    )
    result = await store.commit_turn(commit)
    stored = await store.get_run("r1")
    for state in (result.run, stored):
        assert state.status == RunStatus.COMPLETED
        assert state.lease.owner is None and state.lease.epoch == run.lease.epoch
    with pytest.raises(LeaseUnavailable):
        await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    assert (await store.cancel_run("r1")).status == RunStatus.COMPLETED


async def test_failed_run_records_classified_error(store: ThreadStore) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    error = ClassifiedError("context_overflow", "prompt too long", retryable=False)
    with pytest.raises(LeaseLost):
        await store.finish_run(
            "r1", worker="w2", epoch=run.lease.epoch, status=RunStatus.FAILED, error=error
        )
    await store.finish_run(
        "r1", worker="w1", epoch=run.lease.epoch, status=RunStatus.FAILED, error=error
    )
    stored = await store.get_run("r1")
    assert (stored.status, stored.error, stored.lease.owner) == (RunStatus.FAILED, error, None)


async def test_tool_call_claimed_once_then_finished(store: ThreadStore) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    epoch = run.lease.epoch
    record, fresh = await store.claim_tool_call(
        "r1", "call-1", turn=0, name="add", input_digest=DIGEST, epoch=epoch
    )
    assert fresh and record.status == ToolCallStatus.CLAIMED and record.epoch == epoch
    again, fresh_again = await store.claim_tool_call(
        "r1", "call-1", turn=0, name="add", input_digest=DIGEST, epoch=epoch
    )
    assert not fresh_again and again.status == ToolCallStatus.CLAIMED
    done = await store.finish_tool_call(
        "r1", "call-1", turn=0, epoch=epoch, content="3", is_error=False
    )
    assert (done.status, done.content, done.is_error) == (ToolCallStatus.FINISHED, "3", False)
    seen, fresh3 = await store.claim_tool_call(
        "r1", "call-1", turn=0, name="add", input_digest=DIGEST, epoch=epoch
    )
    assert not fresh3 and seen.content == "3"
    assert await store.get_tool_call("r1", "call-1", turn=0) == seen
    assert await store.get_tool_call("r1", "call-2", turn=0) is None
    with pytest.raises(ToolCallConflict):
        await store.finish_tool_call(
            "r1", "call-1", turn=0, epoch=epoch, content="4", is_error=False
        )


async def test_tool_call_takeover_fences_the_old_claimer(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)
    old = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    await store.claim_tool_call(
        "r1", "call-1", turn=0, name="add", input_digest=DIGEST, epoch=old.lease.epoch
    )
    clock.advance(LEASE + 1)
    new = await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    with pytest.raises(LeaseLost):
        await store.claim_tool_call(
            "r1", "call-2", turn=0, name="add", input_digest=DIGEST, epoch=old.lease.epoch
        )
    with pytest.raises(LeaseLost):
        await store.reclaim_tool_call(
            "r1", "call-1", turn=0, epoch=old.lease.epoch, previous_epoch=old.lease.epoch
        )
    taken = await store.reclaim_tool_call(
        "r1", "call-1", turn=0, epoch=new.lease.epoch, previous_epoch=old.lease.epoch
    )
    assert (taken.epoch, taken.attempts, taken.status) == (
        new.lease.epoch,
        2,
        ToolCallStatus.CLAIMED,
    )
    with pytest.raises(ToolCallConflict):
        await store.finish_tool_call(
            "r1", "call-1", turn=0, epoch=old.lease.epoch, content="late", is_error=False
        )
    await store.finish_tool_call(
        "r1", "call-1", turn=0, epoch=new.lease.epoch, content="3", is_error=False
    )
    assert (await store.get_tool_call("r1", "call-1", turn=0)).content == "3"  # type: ignore[union-attr]


async def test_large_message_round_trips(store: ThreadStore) -> None:
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    big = "é" * 200_000  # 400 KB of UTF-8: over DynamoDB's item limit
    await store.commit_turn(assistant_turn(run, big))
    messages = await store.load_messages("t1")
    assert messages[-1] == Message.assistant(big)


async def test_repeating_a_write_that_already_landed_is_not_a_conflict(
    store: ThreadStore,
) -> None:
    # What a retry after a lost response looks like: the same call, by the same epoch.
    await seed_run(store)
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    epoch = run.lease.epoch
    await store.claim_tool_call("r1", "c1", turn=0, name="add", input_digest=DIGEST, epoch=epoch)
    for _ in range(2):
        done = await store.finish_tool_call(
            "r1", "c1", turn=0, epoch=epoch, content="3", is_error=False
        )
        assert done.status == ToolCallStatus.FINISHED and done.content == "3"
    with pytest.raises(ToolCallConflict):  # a different result is not a repeat
        await store.finish_tool_call("r1", "c1", turn=0, epoch=epoch, content="4", is_error=False)
    for _ in range(2):
        released = await store.release_lease("r1", worker="w1", epoch=epoch)
        assert released.status == RunStatus.SUSPENDED and released.lease.owner is None
    run = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    error = ClassifiedError("x", "y", retryable=False)
    for _ in range(2):
        finished = await store.finish_run(
            "r1", worker="w1", epoch=run.lease.epoch, status=RunStatus.FAILED, error=error
        )
        assert finished.status == RunStatus.FAILED and finished.error == error


async def test_repeated_takeover_of_a_tool_call_is_not_a_conflict(
    store: ThreadStore, clock: FakeClock
) -> None:
    await seed_run(store)
    old = await store.claim_run("r1", worker="w1", lease_seconds=LEASE)
    await store.claim_tool_call(
        "r1", "c1", turn=0, name="add", input_digest=DIGEST, epoch=old.lease.epoch
    )
    clock.advance(LEASE + 1)
    new = await store.claim_run("r1", worker="w2", lease_seconds=LEASE)
    first = await store.reclaim_tool_call(
        "r1", "c1", turn=0, epoch=new.lease.epoch, previous_epoch=old.lease.epoch
    )
    second = await store.reclaim_tool_call(
        "r1", "c1", turn=0, epoch=new.lease.epoch, previous_epoch=old.lease.epoch
    )
    assert first == second and second.attempts == 2
