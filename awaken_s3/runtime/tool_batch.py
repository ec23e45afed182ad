"""The tool calls of one turn, run concurrently: :func:`run_batch`.

Models ask for several calls per turn by default (Anthropic, OpenAI and Bedrock all emit
parallel calls); run one after another, three one-second lookups take three seconds. Here the
calls start in the model's order, at most ``limit`` at once; a call the caller marks
``exclusive`` waits until nothing else runs and runs alone. Results come back in the model's
order whatever order the calls finish in. Each call is still claimed before it runs and
recorded after (the caller's ``run_one``), so running them together changes nothing about
at-most-once.

``may_start`` is asked before each start (the invocation's deadline): a call it refuses is not
started, and its slot in the result is None (its run hands over; the next invocation answers
the finished calls from their records and runs the rest). When one call raises, no other
starts, those running are cancelled, and the first error is raised once all have stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

C = TypeVar("C")
R = TypeVar("R")


async def run_batch(
    calls: Sequence[C],
    run_one: Callable[[C], Awaitable[R]],
    *,
    limit: int,
    exclusive: Callable[[C], bool] = lambda _call: False,
    may_start: Callable[[], bool] = lambda: True,
) -> list[R | None]:
    if limit < 1:
        raise ValueError("limit must be at least 1")
    results: list[R | None] = [None] * len(calls)
    running: set[asyncio.Task[None]] = set()
    slots = asyncio.Semaphore(limit)
    errors: list[BaseException] = []

    async def one(index: int, call: C) -> None:
        try:
            results[index] = await run_one(call)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            errors.append(exc)
            for other in running:
                if other is not asyncio.current_task():
                    other.cancel()
        finally:
            slots.release()
            running.discard(asyncio.current_task())  # type: ignore[arg-type,unused-ignore]

    async def settle() -> None:
        while running:
            await asyncio.wait(set(running))

    try:
        for index, call in enumerate(calls):
            alone = exclusive(call)
            if alone:
                await settle()
            if errors:
                break
            await slots.acquire()
            if errors or not may_start():
                slots.release()
                break
            task = asyncio.create_task(one(index, call))
            running.add(task)
            if alone:
                await settle()
        await settle()
    finally:
        for task in list(running):
            task.cancel()
        for task in list(running):
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if errors:
        raise errors[0]
    return results
