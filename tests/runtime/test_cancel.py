"""A cancel reaches a streaming worker at its next lease renewal: the model call in flight is
abandoned, the turn commits nothing and its partial is deleted, the run ends ``cancelled``.
Deterministic: the model is paused mid-turn on a gate, and each renewal waits for the test to
let it through, so "within one renewal" is counted, not timed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from awaken_s3.errors import CheckpointFenced
from awaken_s3.messages import Message
from awaken_s3.models import StreamCheckpoint
from awaken_s3.runtime.loop import RunEnd, RunResult
from awaken_s3.service import runs
from awaken_s3.service.scoping import scoped_id
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.cancel_mark import Mark
from awaken_s3.streaming.fence import CANCEL_WRITER
from awaken_s3.threads import RunStatus
from awaken_s3.threads.base import ThreadStore
from awaken_s3.threads.models import RunState
from tests.fixtures.runs import seed_run
from tests.runtime.conftest import Backend, build_loop
from tests.runtime.scripts import Effects, TurnAwareProvider, TurnSpec, adding_registry

PROMPT = "tell me everything"
TEXT = "A very long answer that the caller will cancel halfway through. " * 8


class GatedRenewals:
    """The thread store, with every lease renewal held until the test lets one through."""

    def __init__(self, inner: ThreadStore) -> None:
        self.inner = inner
        self.gate: asyncio.Queue[None] = asyncio.Queue()
        self.renewed: list[RunState] = []
        self.changed = asyncio.Condition()

    async def renew_lease(self, run_id: str, **kw: Any) -> RunState:
        await self.gate.get()
        run = await self.inner.renew_lease(run_id, **kw)
        async with self.changed:
            self.renewed.append(run)
            self.changed.notify_all()
        return run

    async def renewals(self, count: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: len(self.renewed) >= count)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class WatchedCheckpoints:
    """The checkpoint store, telling the test when a put with text has landed."""

    def __init__(self, inner: StreamCheckpointStore) -> None:
        self.inner = inner
        self.landed = asyncio.Event()

    async def put(self, checkpoint: StreamCheckpoint, **kw: Any) -> str:
        version = await self.inner.put(checkpoint, **kw)
        if checkpoint.partial_text:
            self.landed.set()
        return version

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def start_run(
    backend: Backend, pause: Any, clock: Any
) -> tuple[GatedRenewals, WatchedCheckpoints, asyncio.Task[RunResult]]:
    """The seeded run driven by a worker whose renewals the test lets through one by one
    (every 1 ms once let through: only the gate paces them)."""
    store = GatedRenewals(backend.threads)
    checkpoints = WatchedCheckpoints(backend.checkpoints)
    loop = build_loop(
        store,
        checkpoints,
        TurnAwareProvider([TurnSpec(TEXT)], pause=pause),
        adding_registry(Effects()),
        worker="w1",
        clock=clock,
        renew_every=0.001,
    )
    return store, checkpoints, asyncio.create_task(loop.run("r1"))


async def test_a_cancel_stops_a_streaming_worker_at_its_next_renewal(
    backend: Backend, clock: Any
) -> None:
    await seed_run(backend.threads, prompt=PROMPT)
    streaming, closed = asyncio.Event(), asyncio.Event()

    async def pause(turn: int, index: int) -> None:
        if index == 6:
            streaming.set()
            try:
                await asyncio.Event().wait()  # a model still streaming when the cancel lands
            finally:
                closed.set()

    store, checkpoints, task = start_run(backend, pause, clock)
    async with asyncio.timeout(30):  # a bound only a hung test reaches
        await asyncio.wait(
            {task, asyncio.ensure_future(streaming.wait())}, return_when="FIRST_COMPLETED"
        )
        assert not task.done(), task.result()
        store.gate.put_nowait(None)  # a renewal before the cancel: the turn streams on
        await store.renewals(1)
        assert not task.done() and store.renewed[0].status == RunStatus.RUNNING
        # The turn's partial lands in the background (the coalescing writer's put): wait for
        # it, so the cancel below has a partial to delete.
        await checkpoints.landed.wait()
        stored = await backend.checkpoints.get("r1")
        assert stored is not None and stored.checkpoint.partial_text

        cancelled = await backend.threads.cancel_run("r1")
        assert cancelled.status == RunStatus.CANCELLED
        store.gate.put_nowait(None)  # exactly one renewal after the cancel
        result = await task
        await closed.wait()
    assert result.end == RunEnd.CANCELLED
    assert [run.status for run in store.renewed] == [RunStatus.RUNNING, RunStatus.CANCELLED]
    run = await backend.threads.get_run("r1")
    assert (run.status, run.turn, run.lease.owner) == (RunStatus.CANCELLED, 0, None)
    # What the docs say a cancelled turn commits: nothing; its partial is deleted.
    messages: Sequence[Message] = await backend.threads.load_messages("t1")
    assert messages == [Message.user(PROMPT)]
    assert await backend.checkpoints.get("r1") is None


async def test_without_a_cancel_renewals_never_stop_the_turn(backend: Backend, clock: Any) -> None:
    """The control: the same renewals on a run nobody cancelled leave the turn streaming."""
    await seed_run(backend.threads, prompt=PROMPT)
    release = asyncio.Event()

    async def pause(turn: int, index: int) -> None:
        if index == 6:
            await release.wait()

    store, _, task = start_run(backend, pause, clock)
    async with asyncio.timeout(30):
        for _ in range(3):
            store.gate.put_nowait(None)
        await store.renewals(3)
        assert not task.done()
        release.set()
        for _ in range(100):
            store.gate.put_nowait(None)
        result = await task
    assert result.end == RunEnd.COMPLETED
    messages = await backend.threads.load_messages("t1")
    assert [m.text for m in messages] == [PROMPT, TEXT]


# -- the cancel's mark: the tokens stop at the worker's next checkpoint put ------------------

OWNER = "alice"
RUN = scoped_id(OWNER, "r1")
#: a renewal interval no test outlives: only the cancel's mark can stop the turn
NEVER = 3600.0


class PacedCheckpoints:
    """The checkpoint store, counting every put that returned (landed or refused): the model
    below is paced by it, one event per put, so "tokens read after the cancel" is counted in
    puts, not in seconds."""

    def __init__(self, inner: StreamCheckpointStore) -> None:
        self.inner = inner
        self.finished = 0
        self.refused = 0
        self.changed = asyncio.Condition()

    async def put(self, checkpoint: StreamCheckpoint, **kw: Any) -> str:
        try:
            return await self.inner.put(checkpoint, **kw)
        except CheckpointFenced:
            self.refused += 1
            raise
        finally:
            async with self.changed:
                self.finished += 1
                self.changed.notify_all()

    async def after(self, count: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: self.finished > count)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Watched:
    """The model, telling the test which events the worker read and when it closed the
    stream (a closed async generator runs its ``finally``)."""

    def __init__(self, inner: TurnAwareProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.read = 0
        self.closed = asyncio.Event()

    def capabilities(self, model: str) -> Any:
        return self.inner.capabilities(model)

    def stream(self, request: Any) -> Any:
        return self._events(request)

    async def _events(self, request: Any) -> Any:
        try:
            async for event in self.inner.stream(request):
                self.read += 1
                yield event
        finally:
            self.closed.set()


async def test_a_cancel_stops_the_tokens_at_the_next_put_not_the_next_renewal(
    backend: Backend, clock: Any
) -> None:
    """No renewal comes during the test: the cancel's mark on the checkpoint refuses the
    worker's next put, its lease check finds the run cancelled, and the provider stream is
    closed within two events of the accepted cancel (the model is paced at one event per
    finished put, so the bound is counted in puts, not seconds)."""
    await seed_run(backend.threads, RUN, prompt=PROMPT)
    checkpoints = PacedCheckpoints(backend.checkpoints)
    streaming, cancelling, accepted = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def pause(turn: int, index: int) -> None:
        if index >= 6:
            streaming.set()
            seen = checkpoints.finished
            if cancelling.is_set():
                # The cancel's read and put fit between two of the worker's puts, as they do
                # between real ones (a put interval apart): the race of the two puts at one
                # version is test_the_cancel_mark_and_the_worker_race_for_one_version's.
                await accepted.wait()
            await checkpoints.after(seen)

    model = Watched(TurnAwareProvider([TurnSpec(TEXT)], pause=pause))
    loop = build_loop(
        backend.threads,
        checkpoints,
        model,
        adding_registry(Effects()),
        worker="w1",
        clock=clock,
        renew_every=NEVER,
    )
    task = asyncio.create_task(loop.run(RUN))
    async with asyncio.timeout(30):  # a bound only a hung test reaches
        await streaming.wait()
        await checkpoints.after(0)  # a partial is stored
        cancelling.set()
        done = await runs.cancel_run(
            backend.threads, owner=OWNER, public="r1", checkpoints=backend.checkpoints, clock=clock
        )
        read_at_cancel = model.read
        accepted.set()
        assert (done.run.status, done.worker_tells, done.mark) == (
            RunStatus.CANCELLED,
            True,
            Mark.MARKED,
        )
        result = await task
        await model.closed.wait()
    assert result.end == RunEnd.CANCELLED
    assert checkpoints.refused >= 1  # the mark refused the worker's put
    assert model.read - read_at_cancel <= 2, "events read after the cancel"
    assert model.read < len(TEXT) // 4, "the turn was not streamed to its end"
    run = await backend.threads.get_run(RUN)
    assert (run.status, run.turn, run.lease.owner) == (RunStatus.CANCELLED, 0, None)
    # The cancel rules: the cancelled turn commits nothing, and its partial (marked or not)
    # is deleted by the worker that ended the run.
    assert await backend.threads.load_messages("t1") == [Message.user(PROMPT)]
    assert await backend.checkpoints.get(RUN) is None


class RacedCheckpoints(PacedCheckpoints):
    """Once armed, the worker's next put and the cancel's put meet at one version: both are
    held until both arrived, then applied in the order the test chose."""

    def __init__(self, inner: StreamCheckpointStore, first: str) -> None:
        super().__init__(inner)
        self.first = first
        self.armed = False
        self.arrived: dict[str, str | None] = {}
        self.outcome: dict[str, str] = {}
        self.stored_after: StreamCheckpoint | None = None
        self.landed: list[StreamCheckpoint] = []
        self._turns = {"api": asyncio.Event(), "worker": asyncio.Event()}
        self._both = asyncio.Event()

    async def put(self, checkpoint: StreamCheckpoint, **kw: Any) -> str:
        who = "api" if checkpoint.writer == CANCEL_WRITER else "worker"
        if not self.armed or who in self.arrived:
            version = await super().put(checkpoint, **kw)
            self.landed.append(checkpoint)
            return version
        self.arrived[who] = kw["expected_version"]
        if len(self.arrived) == 2:
            self._both.set()
        await self._both.wait()
        self._turns[self.first].set()
        await self._turns[who].wait()
        try:
            version = await super().put(checkpoint, **kw)
            self.outcome[who] = "landed"
            self.landed.append(checkpoint)
            return version
        except CheckpointFenced:
            self.outcome[who] = "refused"
            raise
        finally:
            other = "worker" if who == "api" else "api"
            self._turns[other].set()
            if len(self.outcome) == 2:
                stored = await self.inner.get(RUN)
                self.stored_after = stored.checkpoint if stored is not None else None


@pytest.mark.parametrize("first", ["api", "worker"])
async def test_the_cancel_mark_and_the_worker_race_for_one_version(
    backend: Backend, clock: Any, first: str
) -> None:
    """The cancel's put and the worker's put, both conditional on the same version: exactly
    one lands. Whichever loses, nothing is lost (the stored body is a body the worker wrote,
    with the mark as its only change), the worker stops and the run ends cancelled with the
    cancel rules' thread."""
    await seed_run(backend.threads, RUN, prompt=PROMPT)
    checkpoints = RacedCheckpoints(backend.checkpoints, first)
    streaming, cancelling, accepted = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def pause(turn: int, index: int) -> None:
        if index >= 6:
            streaming.set()
            seen = checkpoints.finished
            if cancelling.is_set() and first == "worker" and len(checkpoints.outcome) == 2:
                # After the race (the worker's racing put needs its events until then), the
                # cancel's retry fits before the worker's next put.
                await accepted.wait()
            await checkpoints.after(seen)

    model = Watched(TurnAwareProvider([TurnSpec(TEXT)], pause=pause))
    loop = build_loop(
        backend.threads,
        checkpoints,
        model,
        adding_registry(Effects()),
        worker="w1",
        clock=clock,
        renew_every=NEVER,
    )
    task = asyncio.create_task(loop.run(RUN))
    async with asyncio.timeout(30):  # a bound only a hung test reaches
        await streaming.wait()
        await checkpoints.after(0)
        checkpoints.armed = True
        cancelling.set()
        done = await runs.cancel_run(
            backend.threads, owner=OWNER, public="r1", checkpoints=checkpoints, clock=clock
        )
        accepted.set()
        result = await task
        await model.closed.wait()
    loser = "worker" if first == "api" else "api"
    # One version, two conditional puts: exactly one landed.
    assert checkpoints.arrived["api"] == checkpoints.arrived["worker"] is not None
    assert checkpoints.outcome == {first: "landed", loser: "refused"}
    # Nothing lost: what is stored right after the race is a body the worker wrote (the
    # winner's own, or the one the cancel read), changed in its writer at most.
    stored = checkpoints.stored_after
    assert stored is not None and stored.partial_text
    written = [c for c in checkpoints.landed if c.writer == "w1"]
    assert stored.model_copy(update={"writer": "w1"}) in written
    # The loser's path ends in the cancelled run: the cancel retried and marked (the worker
    # won), or the worker was refused and stopped (the cancel won).
    assert done.mark == Mark.MARKED and done.worker_tells
    assert result.end == RunEnd.CANCELLED
    assert model.read < len(TEXT) // 4, "the worker stopped, not at the end of the turn"
    run = await backend.threads.get_run(RUN)
    assert (run.status, run.turn, run.lease.owner) == (RunStatus.CANCELLED, 0, None)
    assert await backend.threads.load_messages("t1") == [Message.user(PROMPT)]
    assert await backend.checkpoints.get(RUN) is None
