"""A running tool call is bounded by the time its invocation has left.

Time is the suite's fake clock: the timer that bounds a call (the loop's ``sleep``) waits for
the tool to have started, then moves the clock to the deadline and returns, exactly as a real
timer would fire at it. No test sleeps or measures time. On memory and on DynamoDB (moto).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from awaken_s3 import Agent, App, ToolContext, tool
from awaken_s3.failures import FailureCode
from awaken_s3.messages import ToolResultBlock
from awaken_s3.runtime.loop import RunEnd, RunLoop
from awaken_s3.runtime.tools import MAX_TIMEOUTS, OUTCOME_TIMED_OUT, input_digest
from awaken_s3.service.public_errors import public_error
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads import RunStatus, ToolCallStatus
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import SETTINGS, seed_run
from tests.runtime.conftest import EAGER, FAST_RETRY, LEASE, Backend
from tests.runtime.scripts import TurnAwareProvider, TurnSpec

#: seconds each invocation has before it must hand the run over
SLICE = 100.0


class Deadline:
    """The bounding timer: it fires once the tool under test has started (never before, so
    each attempt really runs), by moving the fake clock to the deadline."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.started = asyncio.Event()
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        await self.started.wait()
        self.started.clear()
        self.clock.advance(seconds)


def hanging_loop(backend: Backend, agent: Agent, clock: FakeClock, timer: Deadline) -> RunLoop:
    provider = TurnAwareProvider(
        [TurnSpec("Checking.", (("c1", "hang", {"topic": "x"}),)), TurnSpec("I could not.")]
    )
    runner = TurnRunner(
        provider,
        backend.checkpoints,
        writer_id="w1",
        retry_policy=FAST_RETRY,
        checkpoint_policy=EAGER,
        clock=clock,
    )
    return RunLoop(
        backend.threads,
        runner,
        backend.checkpoints,
        worker_id="w1",
        lease_seconds=LEASE,
        clock=clock,
        monotonic=clock,
        app=App([agent]),
        sleep=timer.sleep,
    )


async def seed(backend: Backend, agent: Agent) -> None:
    settings = dataclasses.replace(SETTINGS, agent=agent.name, tools=agent.tool_names)
    await seed_run(backend.threads, settings=settings)


async def test_an_idempotent_tool_that_hangs_is_retried_a_bounded_number_of_times_then_fails(
    backend: Backend, clock: FakeClock
) -> None:
    timer = Deadline(clock)
    contexts: list[ToolContext] = []

    @tool(idempotent=True)
    async def hang(topic: str, ctx: ToolContext) -> str:
        """Look something up (hangs)."""
        contexts.append(ctx)
        timer.started.set()
        await asyncio.Event().wait()
        return "never"

    agent = Agent("hanger", tools=[hang])
    await seed(backend, agent)
    ends = []
    for _ in range(MAX_TIMEOUTS):
        result = await hanging_loop(backend, agent, clock, timer).run(
            "r1", deadline=clock() + SLICE
        )
        ends.append(result.end)
    assert ends == [RunEnd.SUSPENDED] * (MAX_TIMEOUTS - 1) + [RunEnd.FAILED]
    # Each attempt was cut at its invocation's deadline, no later.
    assert len(timer.waits) == MAX_TIMEOUTS and all(0 < w <= SLICE for w in timer.waits)
    assert [c.attempt for c in contexts] == list(range(1, MAX_TIMEOUTS + 1))
    assert len({c.idempotency_key for c in contexts}) == 1  # one call, retried

    run = await backend.threads.get_run("r1")
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.code == FailureCode.TOOL_TIMED_OUT
    assert public_error(run.error) == {
        "code": "tool_timed_out",
        "message": FailureCode.TOOL_TIMED_OUT.public_message,
    }
    record = await backend.threads.get_tool_call("r1", "c1", turn=1)
    assert record is not None
    assert (record.status, record.timeouts, record.attempts) == (
        ToolCallStatus.TIMED_OUT,
        MAX_TIMEOUTS,
        MAX_TIMEOUTS,
    )
    assert record.input_digest == input_digest({"topic": "x"})


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Lets a hanging sync tool's thread finish once the test is over."""
    event = threading.Event()
    yield event
    event.set()


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_non_idempotent_tool_that_hangs_gets_outcome_unknown_and_never_runs_again(
    backend: Backend, clock: FakeClock, release: threading.Event, kind: str
) -> None:
    timer = Deadline(clock)
    runs: list[str] = []
    loop = asyncio.get_running_loop()

    async def hang_async(topic: str) -> str:
        runs.append(topic)
        timer.started.set()
        await asyncio.Event().wait()
        return "never"

    def hang_sync(topic: str) -> str:
        runs.append(topic)
        loop.call_soon_threadsafe(timer.started.set)
        release.wait()
        return "late, and nobody listens"

    func: Any = hang_async if kind == "async" else hang_sync
    hang = tool(name="hang", description="Charge (hangs; not safe to run twice).")(func)
    agent = Agent("hanger", tools=[hang])
    await seed(backend, agent)
    ends = []
    for _ in range(2):
        result = await hanging_loop(backend, agent, clock, timer).run(
            "r1", deadline=clock() + SLICE
        )
        ends.append(result.end)
    # The result is committed at the deadline; the next invocation lets the model answer.
    assert ends == [RunEnd.SUSPENDED, RunEnd.COMPLETED]
    assert runs == ["x"]
    messages = await backend.threads.load_messages("t1")
    [answer] = [b for m in messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert (answer.content, answer.is_error) == (OUTCOME_TIMED_OUT, True)
    record = await backend.threads.get_tool_call("r1", "c1", turn=1)
    assert record is not None
    assert (record.status, record.timeouts) == (ToolCallStatus.FINISHED, 1)
    release.set()  # the abandoned thread may finish now; its late result reaches nobody


async def test_an_agent_s_tool_timeout_cuts_a_call_before_the_deadline(
    backend: Backend, clock: FakeClock
) -> None:
    timer = Deadline(clock)

    @tool
    async def hang(topic: str) -> str:
        """Charge (hangs; not safe to run twice)."""
        timer.started.set()
        await asyncio.Event().wait()
        return "never"

    agent = Agent("hanger", tools=[hang], tool_timeout=5.0)
    await seed(backend, agent)
    result = await hanging_loop(backend, agent, clock, timer).run("r1", deadline=clock() + SLICE)
    # Cut after the agent's 5 s, with time to spare: the model answers in the same invocation.
    assert result.end == RunEnd.COMPLETED
    assert timer.waits == [5.0]
    messages = await backend.threads.load_messages("t1")
    [answer] = [b for m in messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert (answer.content, answer.is_error) == (OUTCOME_TIMED_OUT, True)
