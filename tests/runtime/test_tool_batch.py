"""The calls of one turn run concurrently: bound, exclusive tools, order, deadline, errors.

Overlap is shown with events, never with time: a call that waits for another to have started
can only finish if the two run at once.
"""

from __future__ import annotations

import asyncio

import pytest

from awaken_s3.runtime.tool_batch import run_batch


class Calls:
    """Records starts and ends, and lets each call wait for others to have started."""

    def __init__(self) -> None:
        self.started: dict[str, asyncio.Event] = {}
        self.log: list[str] = []
        self.running = 0
        self.most = 0

    def event(self, name: str) -> asyncio.Event:
        return self.started.setdefault(name, asyncio.Event())

    async def run(self, name: str, *, waits_for: tuple[str, ...] = ()) -> str:
        self.log.append(f"start {name}")
        self.running += 1
        self.most = max(self.most, self.running)
        self.event(name).set()
        try:
            for other in waits_for:
                await self.event(other).wait()
            await asyncio.sleep(0)
            return name.upper()
        finally:
            self.running -= 1
            self.log.append(f"end {name}")


async def test_calls_run_at_once_and_results_keep_the_model_s_order() -> None:
    calls = Calls()
    # a waits for c, which starts last: only concurrent runs let a finish.
    waits = {"a": ("c",), "b": ("a",), "c": ("a", "b")}
    results = await asyncio.wait_for(
        run_batch(["a", "b", "c"], lambda n: calls.run(n, waits_for=waits[n]), limit=3),
        timeout=30,
    )
    assert results == ["A", "B", "C"]
    assert calls.most == 3


async def test_no_more_than_the_limit_run_at_once() -> None:
    calls = Calls()
    results = await run_batch(list("abcdef"), calls.run, limit=2)
    assert results == list("ABCDEF")
    assert calls.most == 2


async def test_an_exclusive_call_runs_alone() -> None:
    calls = Calls()
    results = await run_batch(
        ["a", "pay", "b", "c"], calls.run, limit=4, exclusive=lambda name: name == "pay"
    )
    assert results == ["A", "PAY", "B", "C"]
    at = calls.log.index("start pay")
    # Everything before it had ended when it started, and nothing started until it ended.
    assert calls.log[at - 1] == "end a" and calls.log[at + 1] == "end pay"


async def test_calls_refused_by_may_start_are_not_started() -> None:
    calls = Calls()
    allowed = iter([True, True, False])
    results = await run_batch(list("abcd"), calls.run, limit=1, may_start=lambda: next(allowed))
    assert results == ["A", "B", None, None]
    assert [entry for entry in calls.log if entry.startswith("start")] == ["start a", "start b"]


async def test_an_error_cancels_the_running_calls_and_starts_no_more() -> None:
    cancelled: list[str] = []
    blocker = asyncio.Event()

    async def one(name: str) -> str:
        if name == "bad":
            await asyncio.sleep(0)
            raise LookupError("lease lost")
        try:
            await blocker.wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return name

    with pytest.raises(LookupError, match="lease lost"):
        await asyncio.wait_for(run_batch(["slow", "bad", "never"], one, limit=2), timeout=30)
    assert cancelled == ["slow"]


async def test_cancelling_the_batch_cancels_every_call() -> None:
    cancelled: list[str] = []

    async def one(name: str) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return name

    batch = asyncio.ensure_future(run_batch(["a", "b"], one, limit=2))
    for _ in range(5):
        await asyncio.sleep(0)
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    assert sorted(cancelled) == ["a", "b"]


async def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        await run_batch(["a"], Calls().run, limit=0)
