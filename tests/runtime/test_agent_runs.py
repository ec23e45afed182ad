"""Runs of an app's agents through the run loop: concurrent tool calls, the token budget, a
thread after a failed run, an agent that is gone, an agent's own provider."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from awaken_s3 import Agent, App, ToolContext, tool
from awaken_s3.messages import Message, TextBlock, ToolResultBlock
from awaken_s3.runtime.loop import UNKNOWN_AGENT, RunEnd, RunLoop
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.errors import InvalidRequest
from awaken_s3.streaming.provider import Provider
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.streaming.scripted import Fail, ScriptedProvider, text_turn
from awaken_s3.threads import RunStatus, ThreadStore
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import SETTINGS, seed_run
from tests.runtime.conftest import EAGER, FAST_RETRY, LEASE
from tests.runtime.scripts import TurnAwareProvider, TurnSpec

THREE = TurnSpec(
    "Looking up three things at once.",
    (
        ("call-a", "lookup", {"topic": "a"}),
        ("call-b", "lookup", {"topic": "b"}),
        ("call-c", "lookup", {"topic": "c"}),
    ),
)


def app_loop(
    threads: ThreadStore,
    checkpoints: StreamCheckpointStore,
    provider: Provider,
    app: App,
    clock: FakeClock,
    **kw: Any,
) -> RunLoop:
    runner = TurnRunner(
        provider, checkpoints, writer_id="w1", retry_policy=FAST_RETRY, checkpoint_policy=EAGER
    )
    return RunLoop(
        threads,
        runner,
        checkpoints,
        worker_id="w1",
        lease_seconds=LEASE,
        clock=clock,
        app=app,
        **kw,
    )


def run_settings(agent: Agent, **changes: Any) -> Any:
    return dataclasses.replace(SETTINGS, agent=agent.name, tools=agent.tool_names, **changes)


async def test_the_calls_of_one_turn_run_at_once_and_commit_in_the_model_s_order(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock
) -> None:
    started = {topic: asyncio.Event() for topic in "abc"}
    contexts: list[ToolContext] = []

    @tool(idempotent=True)
    async def lookup(topic: str, ctx: ToolContext) -> str:
        """Look a topic up."""
        contexts.append(ctx)
        started[topic].set()
        # Each call waits for every other to have started: run one after another, the
        # first would wait for good (and the run would never finish).
        for other in started.values():
            await asyncio.wait_for(other.wait(), timeout=30)
        return f"notes on {topic}"

    agent = Agent("researcher", tools=[lookup])
    await seed_run(threads, settings=run_settings(agent))
    provider = TurnAwareProvider([THREE, TurnSpec("All three found.")])
    loop = app_loop(threads, checkpoints, provider, App([agent]), clock)
    result = await loop.run("r1")
    assert result.end == RunEnd.COMPLETED and result.tool_calls == 3
    results = (await threads.load_messages("t1"))[2].content
    assert [(r.tool_use_id, r.content) for r in results if isinstance(r, ToolResultBlock)] == [
        ("call-a", "notes on a"),
        ("call-b", "notes on b"),
        ("call-c", "notes on c"),
    ]
    assert sorted(c.tool_call_id for c in contexts) == ["call-a", "call-b", "call-c"]
    assert {(c.run_id, c.thread_id, c.caller, c.attempt) for c in contexts} == {
        ("r1", "t1", "alice", 1)
    }
    assert len({c.idempotency_key for c in contexts}) == 3


async def test_at_most_the_agent_s_bound_of_calls_run_at_once(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock
) -> None:
    running: list[int] = [0, 0]

    @tool
    async def lookup(topic: str) -> str:
        """Look a topic up."""
        running[0] += 1
        running[1] = max(running)
        await asyncio.sleep(0)
        running[0] -= 1
        return topic

    agent = Agent("careful", tools=[lookup], max_parallel_tools=1)
    await seed_run(threads, settings=run_settings(agent))
    loop = app_loop(
        threads,
        checkpoints,
        TurnAwareProvider([THREE, TurnSpec("done")]),
        App([agent]),
        clock,
    )
    assert (await loop.run("r1")).end == RunEnd.COMPLETED
    assert running[1] == 1


async def test_a_turn_past_the_token_budget_is_committed_and_ends_the_run_before_its_tools(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock
) -> None:
    ran: list[str] = []

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        ran.append(topic)
        return topic

    agent = Agent("frugal", tools=[lookup], token_budget=10)
    await seed_run(threads, settings=run_settings(agent, token_budget=10))
    # The scripted turn reports 7 input and 32 output tokens: past the budget of 10.
    loop = app_loop(
        threads, checkpoints, TurnAwareProvider([THREE, TurnSpec("x")]), App([agent]), clock
    )
    result = await loop.run("r1")
    assert result.end == RunEnd.FAILED
    assert result.error is not None and result.error.code == "budget_exhausted"
    assert "past its budget of 10" in result.error.message
    assert ran == []  # the turn's tools never ran
    messages = await threads.load_messages("t1")
    assert [m.role for m in messages] == ["user", "assistant"]  # the turn was committed
    run = await threads.get_run("r1")
    assert run.status == RunStatus.FAILED and run.error is not None


async def test_a_run_after_a_failed_one_sends_one_user_message_and_mends_unanswered_calls(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock
) -> None:
    agent = Agent("plain")
    app = App([agent])
    await seed_run(threads, prompt="first question", settings=run_settings(agent))
    failing = ScriptedProvider([[Fail(InvalidRequest("the model refused the request"))]])
    first = await app_loop(threads, checkpoints, failing, app, clock).run("r1")
    assert first.end == RunEnd.FAILED

    await threads.create_run(
        "r2",
        thread_id="t1",
        owner="alice",
        settings=run_settings(agent),
        messages=[Message.user("second question")],
    )
    answering = ScriptedProvider([text_turn("Both answered.")])
    second = await app_loop(threads, checkpoints, answering, app, clock).run("r2")
    assert second.end == RunEnd.COMPLETED
    [sent] = answering.requests[0].messages
    assert sent.content == (TextBlock(text="first question"), TextBlock(text="second question"))
    # The thread itself keeps what happened.
    assert [m.role for m in await threads.load_messages("t1")] == ["user", "user", "assistant"]


async def test_a_run_of_an_agent_that_is_gone_fails_with_a_classified_error(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock
) -> None:
    await seed_run(threads, settings=dataclasses.replace(SETTINGS, agent="retired", tools=()))
    app = App([Agent("current")])
    result = await app_loop(threads, checkpoints, ScriptedProvider([]), app, clock).run("r1")
    assert result.end == RunEnd.FAILED
    assert result.error is not None and result.error.code == UNKNOWN_AGENT
    assert "the agents are current" in result.error.message


async def test_an_agent_s_turns_stream_from_its_own_provider(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock
) -> None:
    agent = Agent("special", provider="openai", model="gpt-x")
    own = ScriptedProvider([text_turn("From the agent's own provider.")])
    asked: list[str] = []

    async def provider_for(which: Agent) -> Provider | None:
        asked.append(which.name)
        return own

    await seed_run(threads, settings=run_settings(agent))
    loop = app_loop(
        threads, checkpoints, ScriptedProvider([]), App([agent]), clock, provider_for=provider_for
    )
    assert (await loop.run("r1")).end == RunEnd.COMPLETED
    assert asked == ["special"] and len(own.requests) == 1
