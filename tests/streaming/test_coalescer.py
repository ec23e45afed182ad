"""The coalescing checkpoint writer, driven directly (no provider)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from awaken_s3.errors import CheckpointTooLarge, StreamCheckpointError
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.streaming.accumulator import StreamAccumulator
from awaken_s3.streaming.coalescer import (
    CheckpointPolicy,
    CoalescingCheckpointWriter,
    StatsCounter,
    WriterContext,
)
from awaken_s3.streaming.events import TextDelta
from tests.fixtures.clock import FakeClock

from .conftest import RUN_ID, THREAD_ID, CountingStore, eventually, saved


class GatedStore(CountingStore):
    """Puts wait for the test to open the gate; tracks puts in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.max_in_flight = 0
        self.started: list[StreamCheckpoint] = []

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        self.started.append(checkpoint)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            return await super().put(checkpoint, expected_version=expected_version)
        finally:
            self.in_flight -= 1


class Harness:
    def __init__(
        self,
        store: CountingStore,
        policy: CheckpointPolicy,
        *,
        epoch: int = 1,
        version: str | None = None,
    ) -> None:
        self.acc = StreamAccumulator()
        self.clock = FakeClock()
        self.stats = StatsCounter()
        self.store = store
        self.writer = CoalescingCheckpointWriter(
            WriterContext(
                store=store,
                run_id=RUN_ID,
                epoch=epoch,
                writer_id="me",
                snapshot=lambda: self.acc.snapshot(
                    run_id=RUN_ID,
                    thread_id=THREAD_ID,
                    model="m",
                    turn=0,
                    retry_count=0,
                    epoch=epoch,
                    writer="me",
                ),
                progress=lambda: self.acc.content_chars,
                version=version,
                version_known=True,
                policy=policy,
                clock=self.clock,
                stats=self.stats,
            )
        )

    def text(self, piece: str, *, boundary: bool = False) -> None:
        self.acc.apply(TextDelta(piece))
        self.writer.offer(boundary)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


SLOW = CheckpointPolicy(min_interval=10.0, min_bytes=1000)


async def test_at_most_one_put_in_flight_and_the_latest_partial_wins() -> None:
    store = GatedStore()
    h = Harness(store, CheckpointPolicy(min_interval=0.0, min_bytes=0))
    for i in range(50):
        h.text(f"{i},")
        await settle()
    assert len(store.started) == 1 and store.started[0].partial_text == "0,"
    store.gate.set()
    await eventually(lambda: len(store.history) >= 2)
    # Intermediate states were skipped: the second put carried all 50 deltas.
    assert [c.partial_text for c in store.history] == ["0,", "".join(f"{i}," for i in range(50))]
    assert store.max_in_flight == 1
    assert h.stats.puts == 2


async def test_nothing_is_written_until_bytes_or_time_are_due() -> None:
    store = CountingStore()
    h = Harness(store, SLOW)
    h.text("x" * 999)
    await settle()
    assert store.history == []
    h.text("y")  # 1000 characters since the last put
    await settle()
    assert len(store.history) == 1
    h.text("z")
    await settle()
    assert len(store.history) == 1
    h.clock.advance(10.0)
    h.text("w")
    await settle()
    assert store.history[-1].partial_text.endswith("zw")


async def test_a_tool_call_boundary_flushes_at_once() -> None:
    store = CountingStore()
    h = Harness(store, SLOW)
    h.text("a")
    await settle()
    assert store.history == []
    h.text("b", boundary=True)
    await settle()
    assert [c.partial_text for c in store.history] == ["ab"]


async def test_a_quiet_stream_is_flushed_by_the_timer() -> None:
    store = CountingStore()
    h = Harness(store, CheckpointPolicy(min_interval=0.02, min_bytes=10_000))
    h.text("quiet")
    await eventually(lambda: bool(store.history))
    assert store.history[0].partial_text == "quiet"


async def test_the_final_flush_waits_for_the_put_in_flight_then_writes_the_rest() -> None:
    store = GatedStore()
    h = Harness(store, CheckpointPolicy(min_interval=0.0, min_bytes=0))
    h.text("first")
    await settle()
    h.text(" second")
    flush = asyncio.create_task(h.writer.flush())
    await settle()
    assert not flush.done()
    store.gate.set()
    await flush
    assert store.history[-1].partial_text == "first second"
    assert h.writer.version == (await store.get(RUN_ID)).version  # type: ignore[union-attr]


async def test_a_forced_flush_writes_even_without_new_content() -> None:
    store = CountingStore()
    h = Harness(store, SLOW)
    await h.writer.flush()
    assert store.history == []
    await h.writer.flush(force=True)
    assert len(store.history) == 1


async def test_a_lost_condition_fences_the_writer_for_good() -> None:
    store = CountingStore()
    newer = saved(epoch=9, writer="other", partial_text="theirs")
    await store.put(newer, expected_version=None)
    h = Harness(store, CheckpointPolicy(min_interval=0.0, min_bytes=0), version=None)
    h.text("mine")
    await settle()
    assert h.writer.fenced
    assert h.stats.fenced == 1
    h.text(" more", boundary=True)
    await h.writer.flush(force=True)
    stored = await store.get(RUN_ID)
    assert stored is not None and stored.checkpoint.partial_text == "theirs"
    assert len(store.history) == 1  # only the setup put


async def test_a_write_by_an_older_epoch_is_overwritten_not_obeyed() -> None:
    store = CountingStore()
    v1 = await store.put(saved(epoch=1, writer="zombie"), expected_version=None)
    h = Harness(store, CheckpointPolicy(min_interval=0.0, min_bytes=0), epoch=2, version=v1)
    await store.put(saved(epoch=1, writer="zombie", partial_text="late"), expected_version=v1)
    h.text("current")
    await h.writer.settle()
    stored = await store.get(RUN_ID)
    assert not h.writer.fenced
    assert stored is not None and stored.checkpoint.partial_text == "current"


class LandsThenFails(CountingStore):
    """The first put reaches the backend but its response is lost."""

    failed = False

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        version = await super().put(checkpoint, expected_version=expected_version)
        if not self.failed:
            self.failed = True
            raise StreamCheckpointError("connection reset after the request was sent")
        return version


async def test_a_put_that_landed_before_failing_does_not_fence_its_own_writer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = LandsThenFails()
    h = Harness(store, CheckpointPolicy(min_interval=0.0, min_bytes=0))
    with caplog.at_level(logging.WARNING, logger="awaken_s3.checkpoint"):
        h.text("one")
        await h.writer.settle()
        h.text(" two")
        await h.writer.settle()
    assert not h.writer.fenced
    assert h.stats.failures == 1 and h.stats.puts == 1
    stored = await store.get(RUN_ID)
    assert stored is not None and stored.checkpoint.partial_text == "one two"
    assert any("failed" in r.message for r in caplog.records)


class Broken(CountingStore):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error
        self.attempts = 0

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        self.attempts += 1
        raise self.error

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        raise self.error


async def test_store_errors_are_logged_counted_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Broken(StreamCheckpointError("S3 is down"))
    h = Harness(store, CheckpointPolicy(min_interval=0.0, min_bytes=0))
    with caplog.at_level(logging.WARNING, logger="awaken_s3.checkpoint"):
        for piece in "abc":
            h.text(piece, boundary=True)
            await h.writer.settle()
    assert store.attempts == 3  # it kept trying: an outage may end
    assert h.stats.failures == 3 and not h.writer.fenced
    assert [r.name for r in caplog.records] == ["awaken_s3.checkpoint"] * 3


async def test_a_checkpoint_too_large_stops_writing() -> None:
    store = Broken(CheckpointTooLarge("too big"))
    h = Harness(store, CheckpointPolicy(min_interval=0.0, min_bytes=0))
    h.text("a", boundary=True)
    await h.writer.settle()
    h.text("b", boundary=True)
    await h.writer.flush(force=True)
    assert store.attempts == 1 and h.stats.failures == 1
