"""The tool calls of one turn, run concurrently: :func:`run_batch`, and :func:`run_tool_calls`
for a run's agent.

Models ask for several calls per turn by default (Anthropic, OpenAI and Bedrock all emit
parallel calls); run one after another, three one-second lookups take three seconds. Here the
calls start in the model's order, at most ``limit`` at once; a call the caller marks
``exclusive`` waits until nothing else runs and runs alone. Results come back in the model's
order whatever order the calls finish in. Each call is still claimed before it runs and
recorded after (the caller's ``run_one``), so running them together changes nothing about
at-most-once.

``may_start`` is asked before each start (the invocation's deadline): a call it refuses is not
started, and its slot in the result is None (its run hands over; the next invocation answers
the finished calls from their records and runs the rest). A running call is bounded by the same
deadline (:func:`~awaken_s3.runtime.tools.execute_tool_call`): an idempotent call that ran out
of time is None too, and is tried again by the next invocation. When one call raises, no other
starts, those running are cancelled, and the first error is raised once all have stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from awaken_s3.messages import ToolResultBlock, ToolUseBlock
from awaken_s3.runtime.tools import CallSite, Sleep, ToolCallTimedOut, execute_tool_call
from awaken_s3.threads.base import ToolCallLedger
from awaken_s3.threads.models import RunState

if TYPE_CHECKING:
    from awaken_s3.agents import Agent

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


def callers_id(owner: str, stored: str) -> str:
    """The id as the run's caller named it (the HTTP API keeps ids in a namespace per caller);
    an id stored outside any namespace is the caller's as it is."""
    from awaken_s3.service.scoping import public_id

    try:
        return public_id(owner, stored)
    except ValueError:
        return stored


async def run_tool_calls(
    ledger: ToolCallLedger,
    agent: Agent,
    run: RunState,
    calls: Sequence[ToolUseBlock],
    *,
    epoch: int,
    may_start: Callable[[], bool],
    deadline: float | None,
    monotonic: Callable[[], float],
    sleep: Sleep = asyncio.sleep,
) -> list[ToolResultBlock | None]:
    """Run a turn's calls through ``agent``'s tools, each claimed and recorded in ``ledger``
    under ``epoch`` (:func:`~awaken_s3.runtime.tools.execute_tool_call`), at most the agent's
    ``max_parallel_tools`` at once and an exclusive tool alone, none past ``deadline``
    (measured by ``sleep``); a call ``may_start`` refuses (the deadline), or an idempotent one
    that ran out of time, is None.

    The calls are those of ``run``'s last committed model turn: ``run.turn`` (the model turns
    committed so far) names that turn in each call's identity. It stays put until their
    results are committed, which does not advance it, so every redelivery names the same
    calls the same way."""
    registry = agent.registry
    site = CallSite(
        run_id=callers_id(run.owner, run.run_id),
        thread_id=callers_id(run.owner, run.thread_id),
        caller=run.owner,
        deadline=deadline,
        monotonic=monotonic,
        sleep=sleep,
    )

    async def one(call: ToolUseBlock) -> ToolResultBlock | None:
        try:
            return await execute_tool_call(
                ledger,
                registry,
                run_id=run.run_id,
                turn=run.turn,
                epoch=epoch,
                call=call,
                enabled=run.settings.tools,
                site=site,
            )
        except ToolCallTimedOut:
            return None

    def alone(call: ToolUseBlock) -> bool:
        tool = registry.get(call.name)
        return tool is not None and tool.exclusive

    return await run_batch(
        calls, one, limit=agent.max_parallel_tools, exclusive=alone, may_start=may_start
    )
