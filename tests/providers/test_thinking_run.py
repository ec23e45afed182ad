"""Whole runs on the real SDKs: extended thinking with two tool calls (and a cut in
between) against servers that refuse a follow-up without the thinking blocks; a
refusal; a paused server-tool turn."""

from __future__ import annotations

from typing import Any

import pytest

from awaken_s3.messages import (
    Message,
    ProviderBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from awaken_s3.runtime.loop import RunEnd, RunLoop
from awaken_s3.runtime.tools import Tool, ToolRegistry
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.errors import InvalidRequest
from awaken_s3.streaming.provider import ModelRequest, Provider
from awaken_s3.streaming.refusal import REFUSAL_NOTICE
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads import InMemoryThreadStore, RunSettings, RunStatus
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import seed_run
from tests.providers.helpers import WEATHER, collect
from tests.providers.wire import anthropic_wire as aw
from tests.providers.wire import bedrock_wire as bw
from tests.providers.wire import openai_wire as ow
from tests.providers.wire.dialects import Dialect, by_name
from tests.providers.wire.server import DROP, Part, Scripted, WireServer
from tests.providers.wire.validation import anthropic_thinking_rules, bedrock_thinking_rules

pytestmark = pytest.mark.slow

QUESTION = "What is the weather in Paris and Oslo?"
FORECAST = {"Paris": "18C, cloudy", "Oslo": "9C, rain"}


async def _no_sleep(delay: float) -> None:
    return None


class Harness:
    def __init__(self, d: Dialect, provider: Provider) -> None:
        self.d = d
        self.threads = InMemoryThreadStore(clock=FakeClock())
        self.checkpoints = InMemoryStreamCheckpointStore()
        self.calls: list[str] = []

        def get_weather(city: str) -> str:
            self.calls.append(city)
            return FORECAST[city]

        tools = ToolRegistry(
            [Tool(WEATHER.name, WEATHER.description, WEATHER.input_schema, get_weather)]
        )
        runner = TurnRunner(
            provider,
            self.checkpoints,
            writer_id="worker-1",
            retry_policy=RetryPolicy(base_delay=0.0, max_delay=0.0),
            sleep=_no_sleep,
        )
        self.loop = RunLoop(
            self.threads, runner, self.checkpoints, tools, worker_id="worker-1", clock=FakeClock()
        )

    async def run(self) -> tuple[Any, list[Message]]:
        settings = RunSettings(model=self.d.model, tools=(WEATHER.name,))
        await seed_run(self.threads, prompt=QUESTION, settings=settings)
        result = await self.loop.run("r1")
        return result, await self.threads.load_messages("t1")


# -- the scripted model, in each wire format ------------------------------------


def anthropic_turns() -> list[Scripted]:
    def tool(index: int, call_id: str, city: str, *, whole: bool = True) -> list[Part]:
        fragments = ['{"city": ', f'"{city}"}}'] if whole else ['{"city": "Os']
        parts: list[Part] = [aw.tool_start(index, call_id, "get_weather")]
        parts += [aw.tool_delta(index, f) for f in fragments]
        return [*parts, aw.block_stop(index)] if whole else parts

    return [
        aw.stream(
            aw.message_start(),
            *aw.thinking_block(0, ["Paris first, ", "then Oslo."]),
            aw.text_block(1, ["Checking Paris."]),
            *tool(2, "toolu_paris", "Paris"),
            *aw.message_end("tool_use"),
        ),
        # Cut inside the second call, after a complete thinking block and some text.
        aw.stream(
            aw.message_start(),
            *aw.thinking_block(0, ["Paris done; Oslo now."]),
            aw.text_block(1, ["Now Oslo."]),
            *tool(2, "toolu_broken", "Oslo", whole=False),
            DROP,
        ),
        aw.stream(
            aw.message_start(),
            *aw.thinking_block(0, ["Continue with the Oslo call."]),
            *tool(1, "toolu_oslo", "Oslo"),
            *aw.message_end("tool_use"),
        ),
        aw.stream(
            aw.message_start(),
            *aw.thinking_block(0, ["Both known."]),
            aw.text_block(1, ["Paris: 18C, cloudy. Oslo: 9C, rain."]),
            *aw.message_end("end_turn"),
        ),
    ]


def bedrock_turns() -> list[Scripted]:
    def tool(index: int, call_id: str, city: str, *, whole: bool = True) -> list[Part]:
        fragments = ['{"city": ', f'"{city}"}}'] if whole else ['{"city": "Os']
        parts: list[Part] = [bw.tool_start(index, call_id, "get_weather")]
        parts += [bw.tool_input(index, f) for f in fragments]
        return [*parts, bw.block_stop(index)] if whole else parts

    end_tool = [bw.message_stop("tool_use"), bw.metadata(20, 10)]
    return [
        bw.stream(
            bw.message_start(),
            *bw.reasoning_block(0, ["Paris first, ", "then Oslo."]),
            bw.text(1, "Checking Paris."),
            bw.block_stop(1),
            *tool(2, "tooluse_paris", "Paris"),
            *end_tool,
        ),
        bw.stream(
            bw.message_start(),
            bw.redacted_reasoning(0, b"\x00redacted\xff"),
            bw.block_stop(0),
            bw.text(1, "Now Oslo."),
            bw.block_stop(1),
            *tool(2, "tooluse_broken", "Oslo", whole=False),
            DROP,
        ),
        bw.stream(
            bw.message_start(),
            *bw.reasoning_block(0, ["Continue with the Oslo call."]),
            *tool(1, "tooluse_oslo", "Oslo"),
            *end_tool,
        ),
        bw.stream(
            bw.message_start(),
            *bw.reasoning_block(0, ["Both known."]),
            bw.text(1, "Paris: 18C, cloudy. Oslo: 9C, rain."),
            bw.block_stop(1),
            bw.message_stop("end_turn"),
            bw.metadata(30, 12),
        ),
    ]


SETUPS: dict[str, Any] = {
    "anthropic": (anthropic_turns, anthropic_thinking_rules, {"thinking": {"type": "adaptive"}}),
    "bedrock": (
        bedrock_turns,
        bedrock_thinking_rules,
        {"additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 2048}}},
    ),
}


def signed(text: str) -> ThinkingBlock:
    return ThinkingBlock(thinking=text, signature=aw.sign(text))


@pytest.mark.parametrize("name", ["anthropic", "bedrock"])
async def test_extended_thinking_with_two_tool_calls_and_a_cut_completes(
    wire: WireServer, name: str
) -> None:
    d = by_name(name)
    turns, rules, extra = SETUPS[name]
    wire.validate = rules
    wire.push(*turns())
    provider = d.provider(wire, extra=extra)
    result, thread = await Harness(d, provider).run()

    assert result.end == RunEnd.COMPLETED, result
    assert result.turns_committed == 3 and result.tool_calls == 2
    assert len(wire.received) == 4  # no request was refused
    first, second, final = thread[1], thread[3], thread[5]
    assert first.content == (
        signed("Paris first, then Oslo."),
        TextBlock(text="Checking Paris."),
        ToolUseBlock(id=first.tool_uses[0].id, name="get_weather", input={"city": "Paris"}),
    )
    # The cut turn: its complete reasoning carried through the in-process R3, the new
    # attempt's reasoning after it, the text, the whole call; the broken call dropped.
    leading = (
        (signed("Paris done; Oslo now."),)
        if name == "anthropic"
        else (RedactedThinkingBlock(data="AHJlZGFjdGVk/w=="),)
    )
    assert second.content == (
        *leading,
        signed("Continue with the Oslo call."),
        TextBlock(text="Now Oslo."),
        ToolUseBlock(id=second.tool_uses[0].id, name="get_weather", input={"city": "Oslo"}),
    )
    assert final.text == "Paris: 18C, cloudy. Oslo: 9C, rain."
    assert "broken" not in wire.received[3].body.decode()

    # The servers do hold the line: the same follow-up without the reasoning is refused.
    stripped = [
        Message(
            role=m.role,
            content=tuple(
                b for b in m.content if not isinstance(b, ThinkingBlock | RedactedThinkingBlock)
            ),
        )
        for m in thread[:5]
    ]
    events, error = await collect(
        provider, ModelRequest(model=d.model, messages=stripped, tools=(WEATHER,))
    )
    assert events == [] and type(error) is InvalidRequest
    assert "must start with a thinking block" in str(error)


# -- refusals and pauses through the run loop --------------------------------------


async def test_anthropic_refusal_fails_the_run_with_a_visible_refusal(wire: WireServer) -> None:
    d = by_name("anthropic")
    wire.push(
        aw.stream(aw.message_start(), aw.text_block(0, ["Hello.."]), *aw.message_end("refusal"))
    )
    result, thread = await Harness(d, d.provider(wire)).run()
    assert result.end == RunEnd.FAILED and result.error.code == "refusal"
    assert result.run.status == RunStatus.FAILED and result.run.stop_reason == "refusal"
    assert thread[-1].content == (TextBlock(text="Hello.."), TextBlock(text=REFUSAL_NOTICE))


async def test_openai_refusal_text_is_committed_as_the_answer(wire: WireServer) -> None:
    d = by_name("openai")
    wire.push(
        ow.stream(
            ow.role(),
            ow.refusal("I can't help "),
            ow.refusal("with that."),
            ow.finish("stop"),
            ow.usage(10, 4),
            ow.DONE,
        )
    )
    result, thread = await Harness(d, d.provider(wire)).run()
    assert result.end == RunEnd.FAILED
    assert result.error.message == "I can't help with that."
    assert thread[-1] == Message.assistant("I can't help with that.")


async def test_anthropic_pause_turn_resends_the_server_blocks_as_received(
    wire: WireServer,
) -> None:
    d = by_name("anthropic")
    wire.push(
        aw.stream(
            aw.message_start(),
            aw.text_block(0, ["Let me search."]),
            aw.server_tool_use_start(1, "srvtoolu_01"),
            aw.tool_delta(1, '{"query": '),
            aw.tool_delta(1, '"paris weather"}'),
            aw.block_stop(1),
            aw.web_search_result_start(2, "srvtoolu_01"),
            aw.block_stop(2),
            *aw.message_end("pause_turn"),
        ),
        aw.stream(aw.message_start(), aw.text_block(0, ["Paris is 18C."]), *aw.message_end()),
    )
    result, thread = await Harness(d, d.provider(wire)).run()
    assert result.end == RunEnd.COMPLETED and result.turns_committed == 2
    search = {
        "type": "server_tool_use",
        "id": "srvtoolu_01",
        "name": "web_search",
        "input": {"query": "paris weather"},
    }
    results = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": aw.SEARCH_RESULTS,
    }
    assert thread[1].content == (
        ProviderBlock(provider="anthropic", block=search),
        ProviderBlock(provider="anthropic", block=results),
        TextBlock(text="Let me search."),
    )
    # The re-sent request ends with the paused turn, its server blocks as the API sent them.
    resent = wire.received[1].json()["messages"]
    assert resent[-1] == {
        "role": "assistant",
        "content": [search, results, {"type": "text", "text": "Let me search."}],
    }
    assert thread[2] == Message.assistant("Paris is 18C.")
