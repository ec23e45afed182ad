"""A checkpoint put slower than the writer's final wait must not leave the committed turn's
checkpoint behind: the delete after the commit waits for it and deletes what it wrote. And
the requests a run saves: no run read right after the claim, no checkpoint read before a
turn whose previous checkpoint this invocation deleted."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from awaken_s3.messages import Message
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.runtime.loop import RunEnd, RunLoop
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.streaming.scripted import ScriptedProvider, finish, text_turn, tool_call
from awaken_s3.threads import InMemoryThreadStore, RunStatus, TurnCommit
from awaken_s3.threads.models import CommitResult
from tests.fixtures.runs import SETTINGS
from tests.runtime.conftest import FAST_RETRY
from tests.runtime.scripts import Effects, adding_registry


class GatedPuts(InMemoryStreamCheckpointStore):
    """Every put waits until the gate opens: an S3 slower than any timeout."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.calls: Counter[str] = Counter()
        self.in_flight = 0

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        self.calls["get"] += 1
        return await super().get(run_id)

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        self.calls["put"] += 1
        self.in_flight += 1
        try:
            await self.gate.wait()
            return await super().put(checkpoint, expected_version=expected_version)
        finally:
            self.in_flight -= 1

    async def quiet(self) -> None:
        """Let every put that is still running land (the gate is open by now)."""
        for _ in range(1000):
            if not self.in_flight:
                return
            await asyncio.sleep(0)
        raise AssertionError("a put never ended")


class OpensOnCommit(InMemoryThreadStore):
    """S3 answers once the turn is committed, i.e. after the writer gave up waiting."""

    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__()
        self.gate = gate

    async def commit_turn(self, commit: TurnCommit) -> CommitResult:
        result = await super().commit_turn(commit)
        self.gate.set()
        return result


class CountingReads:
    """The loop's view of a store, counting the runs it reads (the store's own internal
    reads are not the loop's requests)."""

    def __init__(self, inner: InMemoryThreadStore) -> None:
        self.inner = inner
        self.run_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get_run(self, run_id: str) -> Any:
        self.run_reads += 1
        return await self.inner.get_run(run_id)


async def start(threads: InMemoryThreadStore) -> None:
    await threads.create_thread("t1", owner="alice")
    await threads.create_run(
        "r1", thread_id="t1", owner="alice", settings=SETTINGS, messages=[Message.user("hi")]
    )


def loop_over(threads: Any, store: Any, provider: Any, **kw: Any) -> RunLoop:
    runner = TurnRunner(
        provider,
        store,
        writer_id="w1",
        retry_policy=FAST_RETRY,
        # Every delta starts a put; the final wait gives up on a put at once.
        checkpoint_policy=CheckpointPolicy(min_interval=0.0, min_bytes=0, final_flush_timeout=0.01),
    )
    tools = adding_registry(Effects())
    return RunLoop(threads, runner, store, tools, worker_id="w1", lease_seconds=30.0, **kw)


async def test_a_put_slower_than_the_final_wait_is_deleted_after_the_commit() -> None:
    store = GatedPuts()
    threads = OpensOnCommit(store.gate)
    await start(threads)
    provider = ScriptedProvider([text_turn("A turn whose checkpoint put is slow.")])
    result = await loop_over(threads, store, provider).run("r1")
    assert result.end == RunEnd.COMPLETED
    assert store.calls["put"] >= 1
    await store.quiet()
    assert await store.get("r1") is None  # nothing left behind, even after the put landed
    assert not result.checkpoint_left
    assert (await threads.get_run("r1")).status == RunStatus.COMPLETED


async def test_a_run_reads_neither_the_run_after_its_claim_nor_a_checkpoint_it_deleted() -> None:
    store = GatedPuts()
    store.gate.set()
    threads = OpensOnCommit(store.gate)
    await start(threads)
    provider = ScriptedProvider(
        [
            [*tool_call(0, "add", {"a": 1, "b": 2}, call_id="c1"), *finish("tool_use")],
            text_turn("3"),
        ]
    )
    counting = CountingReads(threads)
    result = await loop_over(counting, store, provider, renew_every=0).run("r1")
    assert result.end == RunEnd.COMPLETED and result.turns_committed == 2
    # The first turn reads the checkpoint (a crash may have left one); the second does not:
    # this invocation deleted the first turn's after its commit.
    assert store.calls["get"] == 1
    # One read of the run per step after the first (the claim returned the run): the tool
    # step and the second model turn; none right after the claim.
    assert counting.run_reads == 2
    assert await store.get("r1") is None
