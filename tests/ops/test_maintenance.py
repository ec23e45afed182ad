"""Which checkpoints an operator may clean, and cleaning them without harming live runs."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from datetime import UTC, datetime, timedelta

import pytest

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.maintenance import (
    KEPT_REWRITTEN,
    KEPT_UNKNOWN_VERSION,
    Verdict,
    clean,
    clean_leftovers,
    delete_stale,
    stale_reason,
    survey,
)
from awaken_s3.messages import Message
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint, encode_checkpoint
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.cancel_mark import Mark, mark_cancelled
from awaken_s3.threads.memory import InMemoryThreadStore
from awaken_s3.threads.models import RunState, RunStatus
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import run_state, seed_run
from tests.ops.world import seed_ended_and_live

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def checkpoint(
    run_id: str = "run-1", *, turn: int = 0, age: timedelta = timedelta(0)
) -> StreamCheckpoint:
    return StreamCheckpoint(
        run_id=run_id,
        thread_id="thread-1",
        model="m",
        turn=turn,
        partial_text="partial",
        epoch=1,
        writer="w",
        updated_at=NOW - age,
    )


def run(status: RunStatus = RunStatus.RUNNING, turn: int = 0) -> RunState:
    return run_state(run_id="run-1", thread_id="thread-1", status=status, turn=turn)


def test_a_checkpoint_of_the_run_s_current_turn_is_kept() -> None:
    assert stale_reason(checkpoint(turn=2), run(turn=2), now=NOW) is None
    assert stale_reason(checkpoint(), run(RunStatus.SUSPENDED), now=NOW) is None
    assert stale_reason(checkpoint(), run(RunStatus.QUEUED), now=NOW) is None


def test_a_committed_turn_an_ended_run_a_missing_run_or_corruption_make_it_stale() -> None:
    assert "already committed" in (stale_reason(checkpoint(turn=1), run(turn=2), now=NOW) or "")
    for ended in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
        assert ended.value in (stale_reason(checkpoint(), run(ended), now=NOW) or "")
    assert "does not exist" in (stale_reason(checkpoint(), None, now=NOW) or "")
    assert "corrupt" in (stale_reason(None, run(), now=NOW) or "")


def test_age_retires_a_live_run_s_checkpoint_only_when_asked() -> None:
    old = checkpoint(age=timedelta(hours=30))
    assert stale_reason(old, run(), now=NOW) is None
    assert stale_reason(old, run(), now=NOW, max_age=timedelta(hours=48)) is None
    assert "untouched since" in (
        stale_reason(old, run(), now=NOW, max_age=timedelta(hours=24)) or ""
    )


async def _world() -> tuple[InMemoryStreamCheckpointStore, InMemoryThreadStore]:
    threads = InMemoryThreadStore()
    await seed_ended_and_live(threads)
    store = InMemoryStreamCheckpointStore()
    await store.put(checkpoint("live"), expected_version=None)
    await store.put(checkpoint("done"), expected_version=None)
    await store.put(checkpoint("orphan"), expected_version=None)
    store.put_raw("broken", b"not a checkpoint")
    return store, threads


async def test_clean_deletes_only_stale_checkpoints_and_a_dry_run_deletes_nothing() -> None:
    store, threads = await _world()
    planned = await clean(store, threads, now=NOW, dry_run=True)
    assert sorted((c.verdict.run_id, c.action) for c in planned) == [
        ("broken", "would delete"),
        ("done", "would delete"),
        ("orphan", "would delete"),
    ]
    assert sorted([r async for r in store.list_run_ids()]) == ["broken", "done", "live", "orphan"]

    cleaned = await clean(store, threads, now=NOW)
    assert sorted(c.verdict.run_id for c in cleaned if c.action == "deleted") == [
        "broken",
        "done",
        "orphan",
    ]
    assert [r async for r in store.list_run_ids()] == ["live"]


async def test_a_checkpoint_rewritten_after_it_was_judged_is_kept() -> None:
    store, threads = await _world()
    verdicts = [v async for v in survey(store, threads, now=NOW)]
    judged = next(v for v in verdicts if v.run_id == "orphan")
    assert judged.stale is not None
    # A worker rewrites the checkpoint between the survey and the delete.
    rewritten = checkpoint("orphan").model_copy(update={"partial_text": "newer", "epoch": 2})
    await store.put(rewritten, expected_version=judged.version)

    cleaned = await delete_stale(store, [judged])
    assert [c.action for c in cleaned] == ["kept: rewritten since it was judged"]
    stored = await store.get("orphan")
    assert stored is not None
    assert stored.checkpoint == rewritten


async def test_a_corrupt_object_replaced_after_it_was_judged_is_kept() -> None:
    store, threads = await _world()
    verdicts = [v async for v in survey(store, threads, now=NOW)]
    judged = next(v for v in verdicts if v.run_id == "broken")
    assert judged.checkpoint is None and judged.version is not None
    # A worker holding the lease replaces the garbage with a real checkpoint meanwhile.
    store.put_raw("broken", encode_checkpoint(checkpoint("broken")))

    cleaned = await delete_stale(store, [judged])
    assert [c.action for c in cleaned] == [KEPT_REWRITTEN]
    assert await store.get("broken") is not None


async def test_a_verdict_without_a_version_is_never_deleted_blindly() -> None:
    store, _ = await _world()
    blind = Verdict("broken", None, None, None, "corrupt: not a readable checkpoint")
    cleaned = await delete_stale(store, [blind])
    assert [c.action for c in cleaned] == [KEPT_UNKNOWN_VERSION]
    assert "broken" in [r async for r in store.list_run_ids()]


async def test_a_checkpoint_from_a_newer_build_is_left_alone_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, threads = await _world()
    payload = json.loads(encode_checkpoint(checkpoint("orphan")))
    payload["schema_version"] = 7
    store.put_raw("orphan", json.dumps(payload).encode())

    verdicts = {v.run_id: v for v in [v async for v in survey(store, threads, now=NOW)]}
    assert (verdicts["orphan"].newer_schema, verdicts["orphan"].stale) == (7, None)
    with caplog.at_level(logging.WARNING, logger="awaken_s3.maintenance"):
        cleaned = await clean(store, threads, now=NOW)
    actions = {c.verdict.run_id: c.action for c in cleaned}
    assert actions["orphan"] == "kept: written by a newer build (schema_version 7)"
    assert actions["broken"] == "deleted"
    assert "orphan" in [r async for r in store.list_run_ids()]
    assert any("schema_version 7" in r.getMessage() for r in caplog.records)


async def test_a_newer_build_s_checkpoint_of_an_ended_run_is_stale_whatever_wrote_it() -> None:
    # The invocation that ended the run left it alone (checkpoint_left) and its record was
    # acknowledged: the clean-up (the sweeper's too) is what deletes it, at its version.
    store, threads = await _world()
    payload = json.loads(encode_checkpoint(checkpoint("done")))
    payload["schema_version"] = 7
    judged = store.put_raw("done", json.dumps(payload).encode())

    verdicts = {v.run_id: v for v in [v async for v in survey(store, threads, now=NOW)]}
    assert (verdicts["done"].newer_schema, verdicts["done"].stale) == (None, "its run is completed")
    assert verdicts["done"].version == judged
    cleaned = await clean(store, threads, now=NOW)
    assert {c.verdict.run_id: c.action for c in cleaned}["done"] == "deleted"
    assert "done" not in [r async for r in store.list_run_ids()]


async def test_the_sweeper_deletes_what_outlived_its_run_once_it_has_been_quiet() -> None:
    clock = FakeClock(NOW.timestamp())
    threads = InMemoryThreadStore()
    await seed_ended_and_live(threads)
    store = InMemoryStreamCheckpointStore(clock=clock)
    await store.put(checkpoint("done"), expected_version=None)  # the run ended meanwhile
    await store.put(checkpoint("live"), expected_version=None)  # a run still going
    clock.advance(60)
    await store.put(checkpoint("orphan"), expected_version=None)  # written just now
    quiet = timedelta(seconds=30)
    now = datetime.fromtimestamp(clock(), UTC)

    cleaned = await clean_leftovers(store, threads, now=now, quiet_for=quiet)
    # "orphan" has no run, but it was written within the quiet period: not even read yet.
    assert [(c.verdict.run_id, c.action) for c in cleaned] == [("done", "deleted")]
    assert sorted([r async for r in store.list_run_ids()]) == ["live", "orphan"]

    clock.advance(60)
    later = datetime.fromtimestamp(clock(), UTC)
    cleaned = await clean_leftovers(store, threads, now=later, quiet_for=quiet)
    assert [(c.verdict.run_id, c.action) for c in cleaned] == [("orphan", "deleted")]
    # A live run's checkpoint is never touched, however long it has been quiet.
    assert [r async for r in store.list_run_ids()] == ["live"]


async def test_one_sweep_judges_at_most_its_limit() -> None:
    threads = InMemoryThreadStore()
    store = InMemoryStreamCheckpointStore(clock=lambda: 0.0)
    for n in range(5):
        await store.put(checkpoint(f"orphan-{n}"), expected_version=None)
    first = await clean_leftovers(store, threads, now=NOW, quiet_for=timedelta(0), limit=2)
    assert len(first) == 2
    assert len([r async for r in store.list_run_ids()]) == 3


async def test_a_leftover_never_waits_for_good_behind_quiet_live_checkpoints() -> None:
    # Runs waiting in a queue with a saved partial are quiet too; with more of them than one
    # sweep reads, a fixed listing order would keep the leftover out of every sweep.
    threads = InMemoryThreadStore()
    await seed_ended_and_live(threads)
    store = InMemoryStreamCheckpointStore(clock=lambda: 0.0)
    for n in range(9):
        await store.put(checkpoint(f"a-live-{n}"), expected_version=None)
        await threads.create_thread(f"waiting-{n}", owner="alice")
        await threads.create_run(
            f"a-live-{n}",
            thread_id=f"waiting-{n}",
            owner="alice",
            settings=run().settings,
            messages=[Message.user("hi")],
        )
    await store.put(checkpoint("done"), expected_version=None)  # sorts after every live one
    draws = random.Random(7)
    for _ in range(30):
        await clean_leftovers(store, threads, now=NOW, quiet_for=timedelta(0), limit=3, rng=draws)
        if "done" not in [r async for r in store.list_run_ids()]:
            break
    listed = [r async for r in store.list_run_ids()]
    assert "done" not in listed
    assert len(listed) == 9  # every live run's checkpoint is still there


async def test_a_cancel_s_mark_whose_worker_was_gone_is_a_leftover_the_sweeper_deletes() -> None:
    """The API marks the checkpoint of a run it cancelled while a lease was live; when the
    worker that held it was already gone, nobody settles the mark but the leftover clean:
    its run ended, so it is stale whatever wrote it."""
    clock = FakeClock(NOW.timestamp())
    threads = InMemoryThreadStore(clock=clock)
    await seed_run(threads, "run-1", thread_id="thread-1")
    claimed = await threads.claim_run("run-1", worker="gone", lease_seconds=30)
    store = InMemoryStreamCheckpointStore(clock=clock)
    await store.put(checkpoint(), expected_version=None)  # the worker's last put
    cancelled = await threads.cancel_run("run-1")
    assert cancelled.lease.epoch == claimed.lease.epoch
    assert await mark_cancelled(store, cancelled) is Mark.MARKED
    clock.advance(120)
    now = datetime.fromtimestamp(clock(), UTC)
    cleaned = await clean_leftovers(store, threads, now=now, quiet_for=timedelta(seconds=30))
    assert [(c.verdict.run_id, c.action) for c in cleaned] == [("run-1", "deleted")]
    assert [r async for r in store.list_run_ids()] == []


class _Overlapping(InMemoryStreamCheckpointStore):
    """Counts reads in flight at once; fails the read of ``fail``."""

    def __init__(self, fail: str | None = None) -> None:
        super().__init__()
        self.in_flight = 0
        self.most = 0
        self.fail = fail

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0)  # a round trip: the others get their turn
            if run_id == self.fail:
                raise StreamCheckpointError("S3 get failed: SlowDown (HTTP 503)", run_id=run_id)
            return await super().get(run_id)
        finally:
            self.in_flight -= 1


async def test_a_survey_judges_checkpoints_side_by_side_each_once() -> None:
    store, threads = _Overlapping(), InMemoryThreadStore()
    run_ids = [f"run-{n:03d}" for n in range(100)]
    for run_id in run_ids:
        await store.put(checkpoint(run_id), expected_version=None)
    verdicts = [v async for v in survey(store, threads, now=NOW, concurrency=8)]
    assert sorted(v.run_id for v in verdicts) == run_ids
    assert all(v.stale is not None and "does not exist" in v.stale for v in verdicts)
    assert store.most == 8
    one_by_one = _Overlapping()
    await one_by_one.put(checkpoint("run-1"), expected_version=None)
    assert [v.run_id async for v in survey(one_by_one, threads, now=NOW, concurrency=1)] == [
        "run-1"
    ]
    assert one_by_one.most == 1


async def test_a_failed_read_in_a_survey_is_raised_as_itself() -> None:
    # The CLI explains a StreamCheckpointError in one line; an exception group would not be.
    store, threads = _Overlapping(fail="run-005"), InMemoryThreadStore()
    for n in range(10):
        await store.put(checkpoint(f"run-{n:03d}"), expected_version=None)
    with pytest.raises(StreamCheckpointError, match="SlowDown"):
        _ = [v async for v in survey(store, threads, now=NOW, concurrency=4)]
