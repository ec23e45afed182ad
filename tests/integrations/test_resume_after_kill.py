"""A real framework agent (Strands Agents, Pydantic AI) with its model wrapped in
``ResumableModel``, SIGKILLed mid-turn and run again with the same key: the framework's own
agent loop and tools, the real provider SDKs, the wire servers' real stream formats.

After the rerun the answer is whole, the prefix was not generated again (the wire server saw a
continuation request, or no request at all for complete tool calls), and no tool ran for an
incomplete call."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from awaken_s3 import StreamCheckpoint
from awaken_s3.integrations import checkpoint_key
from awaken_s3.streaming.continuation import CONTINUE_INSTRUCTION
from tests.integrations.processes import kill_when, read_checkpoint, run
from tests.providers.wire.dialects import Dialect, by_name
from tests.providers.wire.server import STALL, Received, WireServer

pytestmark = pytest.mark.slow

KEY = "weather-job-1"
RUN_ID = "run-1"


@dataclass
class Agent:
    framework: str
    dialect: Dialect
    tmp: Path
    wire: WireServer
    streaming: bool = False
    #: run through the recipe for a crash of the whole loop (the framework's persistence)
    recipe: bool = False

    @property
    def key(self) -> str:
        return checkpoint_key("conversation-7", RUN_ID) if self.recipe else KEY

    def argv(self) -> list[str]:
        config = {
            "framework": self.framework,
            "dialect": self.dialect.name,
            "url": self.wire.url,
            "store": str(self.tmp / "checkpoints"),
            "tool_log": str(self.tmp / "tools.log"),
            "key": self.key,
            "streaming": self.streaming,
            "recipe": self.recipe,
            "saved": str(self.tmp / "saved"),
            "run_id": RUN_ID,
        }
        return [sys.executable, "-m", "tests.integrations.agent_proc", json.dumps(config)]

    async def kill_when(self, saved: Callable[[StreamCheckpoint], bool]) -> None:
        await kill_when(self.argv(), saved, directory=self.tmp / "checkpoints", key=self.key)

    async def run(self) -> str:
        out = await run(self.argv())
        return str(json.loads(out.strip().splitlines()[-1])["answer"])

    def tool_runs(self) -> list[dict[str, Any]]:
        log = self.tmp / "tools.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    async def checkpoint_left(self) -> bool:
        return read_checkpoint(self.tmp / "checkpoints", self.key) is not None


def messages(dialect: Dialect, received: Received) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in dialect.messages(received)]


def tool_result_ids(received: Received) -> list[str]:
    ids: list[str] = []
    for message in received.json()["messages"]:
        if message.get("role") == "tool":
            ids.append(message["tool_call_id"])
        content = message.get("content")
        if isinstance(content, list):
            ids += [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]
    return ids


def tool_call_ids(received: Received) -> list[str]:
    ids: list[str] = []
    for message in received.json()["messages"]:
        ids += [c["id"] for c in message.get("tool_calls") or []]
        content = message.get("content")
        if isinstance(content, list):
            ids += [b["id"] for b in content if b.get("type") == "tool_use"]
    return ids


FRAMEWORKS = [
    ("strands", "anthropic", False),
    ("strands", "openai", False),
    ("pydantic_ai", "anthropic", False),
    ("pydantic_ai", "openai", True),
]
IDS = [f"{f}-{d}-{'stream' if s else 'request'}" for f, d, s in FRAMEWORKS]
#: Strands' OpenAI model gathers a call's argument fragments until the stream ends, so
#: nothing of a call reaches the checkpoint before its turn completes
TOOL_CUTS = [c for c in FRAMEWORKS if c[:2] != ("strands", "openai")]
TOOL_IDS = [i for i, c in zip(IDS, FRAMEWORKS, strict=True) if c in TOOL_CUTS]


@pytest.fixture
async def wire() -> Any:
    server = WireServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.mark.parametrize(("framework", "dialect_name", "streaming"), FRAMEWORKS, ids=IDS)
async def test_killed_mid_text_the_rerun_continues_the_answer(
    framework: str, dialect_name: str, streaming: bool, wire: WireServer, tmp_path: Path
) -> None:
    d = by_name(dialect_name)
    agent = Agent(framework, d, tmp_path, wire, streaming)
    prefix = "The weather in Paris is 18C and "
    wire.push(d.stream(d.start(), d.text(["The weather ", "in Paris ", "is 18C and "]), [STALL]))
    await agent.kill_when(lambda c: c.partial_text == prefix)

    wire.push(d.text_turn(["cloudy, ", "with light rain."]))
    answer = await agent.run()

    assert answer == "The weather in Paris is 18C and cloudy, with light rain."
    resumed = wire.received[1]
    assert messages(d, resumed)[-2:] == [
        ("assistant", prefix.rstrip()),
        ("user", CONTINUE_INSTRUCTION),
    ]
    assert len(wire.received) == 2 and agent.tool_runs() == []
    assert not await agent.checkpoint_left()  # the answer deleted it


@pytest.mark.parametrize(("framework", "dialect_name", "streaming"), TOOL_CUTS, ids=TOOL_IDS)
async def test_killed_mid_tool_arguments_the_call_is_dropped_and_never_run(
    framework: str, dialect_name: str, streaming: bool, wire: WireServer, tmp_path: Path
) -> None:
    d = by_name(dialect_name)
    agent = Agent(framework, d, tmp_path, wire, streaming)
    broken = [("call_cut", "get_weather", ['{"city"', ': "Pa'], False)]
    wire.push(
        d.stream(d.start(), d.text(["Let me ", "check. "]), d.tools(broken, first_block=1), [STALL])
    )
    await agent.kill_when(
        lambda c: bool(c.tool_calls) and c.tool_calls[0].arguments == '{"city": "Pa'
    )

    whole = [("call_new", "get_weather", ['{"city": ', '"Paris"}'], True)]
    wire.push(
        d.stream(d.start(), d.tools(whole, first_block=0), d.end("tool_use")),
        d.text_turn(["It is 18C ", "and cloudy in Paris."]),
    )
    answer = await agent.run()

    assert answer == "It is 18C and cloudy in Paris."
    assert agent.tool_runs() == [{"city": "Paris"}]
    continuation, after_tool = wire.received[1], wire.received[2]
    assert messages(d, continuation)[-2:] == [
        ("assistant", "Let me check."),
        ("user", CONTINUE_INSTRUCTION),
    ]
    assert "call_cut" not in tool_call_ids(continuation)
    assert tool_result_ids(after_tool) == ["call_new"]
    assert "call_cut" not in tool_call_ids(after_tool)


@pytest.mark.parametrize(("framework", "dialect_name", "streaming"), TOOL_CUTS, ids=TOOL_IDS)
async def test_killed_after_complete_tool_calls_the_rerun_makes_no_model_call_for_them(
    framework: str, dialect_name: str, streaming: bool, wire: WireServer, tmp_path: Path
) -> None:
    d = by_name(dialect_name)
    agent = Agent(framework, d, tmp_path, wire, streaming)
    calls = [("call_1", "get_weather", ['{"city": ', '"Paris"}'], True)]
    wire.push(
        d.stream(d.start(), d.text(["Let me check. "]), d.tools(calls, first_block=1), [STALL])
    )
    await agent.kill_when(
        lambda c: bool(c.tool_calls) and c.tool_calls[0].arguments == '{"city": "Paris"}'
    )

    wire.push(d.text_turn(["It is 18C ", "and cloudy in Paris."]))
    answer = await agent.run()

    assert answer == "It is 18C and cloudy in Paris."
    assert len(wire.received) == 2  # the rerun's only request carries the tool's result
    assert tool_result_ids(wire.received[1]) == ["call_1"]
    assert agent.tool_runs() == [{"city": "Paris"}]


@pytest.mark.parametrize(("framework", "dialect_name", "streaming"), FRAMEWORKS, ids=IDS)
async def test_the_whole_loop_killed_in_its_final_answer_resumes_it_with_the_recipe(
    framework: str, dialect_name: str, streaming: bool, wire: WireServer, tmp_path: Path
) -> None:
    """A tool-using agent killed after its tool ran, in the middle of its final answer, and
    run again through the recipe (the framework's persistence of the conversation): the
    answer continues from the checkpoint (R1) and the tool does not run again; a third run
    of the finished run answers from what was saved."""
    d = by_name(dialect_name)
    agent = Agent(framework, d, tmp_path, wire, streaming, recipe=True)
    calls = [("call_1", "get_weather", ['{"city": ', '"Paris"}'], True)]
    prefix = "It is 18C and "
    wire.push(
        d.stream(d.start(), d.tools(calls, first_block=0), d.end("tool_use")),
        d.stream(d.start(), d.text(["It is ", "18C and "]), [STALL]),
    )
    await agent.kill_when(lambda c: c.turn == 1 and c.partial_text == prefix)
    assert agent.tool_runs() == [{"city": "Paris"}]

    wire.push(d.text_turn(["cloudy ", "in Paris."]))
    answer = await agent.run()

    assert answer == "It is 18C and cloudy in Paris."
    assert agent.tool_runs() == [{"city": "Paris"}]  # once, before the kill
    assert len(wire.received) == 3  # the rerun's only request continues the cut answer
    resumed = wire.received[2]
    assert messages(d, resumed)[-2:] == [
        ("assistant", prefix.rstrip()),
        ("user", CONTINUE_INSTRUCTION),
    ]
    assert tool_result_ids(resumed) == ["call_1"]  # the saved result, not a new call
    assert not await agent.checkpoint_left()

    assert await agent.run() == answer  # the run is over: no model call, no tool run
    assert len(wire.received) == 3 and agent.tool_runs() == [{"city": "Paris"}]
