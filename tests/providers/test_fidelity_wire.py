"""Reasoning, server-tool, refusal and tool-identity streams on the real SDKs, cut inside
each new block kind and resumed in a new process.

Process A is the test process: the wire server cuts the connection inside the block, and
with no retry budget the runner ends the turn with the partial flushed to a checkpoint
directory. Process B is a real new Python process (:mod:`tests.providers.resume_proc`)
that opens that directory with a fresh store and a fresh adapter, plans the checkpoint
and finishes the turn against the same wire server.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.messages import Message
from awaken_s3.models import StreamCheckpoint
from awaken_s3.stores.fs import FsStreamCheckpointStore
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.continuation import CONTINUE_INSTRUCTION
from awaken_s3.streaming.outcome import TurnCompleted, TurnFailed, TurnOutcome
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.recovery import plan_recovery
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.streaming.turn_request import TurnRequest
from tests.providers.helpers import WEATHER, collect
from tests.providers.wire import anthropic_wire as aw
from tests.providers.wire import bedrock_wire as bw
from tests.providers.wire import openai_wire as ow
from tests.providers.wire.dialects import DIALECTS, Dialect, by_name
from tests.providers.wire.server import DROP, Part, Scripted, WireServer
from tests.providers.wire.validation import anthropic_thinking_rules, bedrock_thinking_rules

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RUN, THREAD = "run-f", "thread-f"
QUESTION = Message.user("What is the weather in Paris?")
THINKING = {"type": "enabled", "budget_tokens": 1024}
EXTRA: dict[str, dict[str, Any]] = {
    "anthropic": {"thinking": {"type": "adaptive"}},
    "bedrock": {"additionalModelRequestFields": {"thinking": THINKING}},
    "openai": {},
}
REDACTED_DATA = "EmwKAhgBEgy3va3pzix/LafPsn4agDk0xKn8Sx0BkE0CGw"
REDACTED_BYTES = b"\x01\x02encrypted reasoning\xff"


def request(d: Dialect) -> ModelRequest:
    return ModelRequest(model=d.model, messages=(QUESTION,), tools=(WEATHER,))


async def first_process(
    wire: WireServer, d: Dialect, store_dir: Path, response: Scripted, *, extra: dict[str, Any]
) -> tuple[TurnOutcome, StreamCheckpoint]:
    wire.push(response)
    with FsStreamCheckpointStore(store_dir) as store:
        runner = TurnRunner(
            d.provider(wire, extra=extra),
            store,
            writer_id="worker-1",
            retry_policy=RetryPolicy(max_interruptions=0),
        )
        outcome = await runner.run_turn(
            TurnRequest(run_id=RUN, thread_id=THREAD, turn=0, epoch=1, request=request(d))
        )
        stored = await store.get(RUN)
    assert stored is not None
    return outcome, stored.checkpoint


async def new_process(
    wire: WireServer, d: Dialect, store_dir: Path, *, extra: dict[str, Any], prefill: bool | None
) -> dict[str, Any]:
    config = {
        "dialect": d.name,
        "url": wire.url,
        "store": str(store_dir),
        "model": d.model,
        "messages": [QUESTION.model_dump(mode="json")],
        "run_id": RUN,
        "thread_id": THREAD,
        "epoch": 2,
        "provider_extra": extra,
        "prefill": prefill,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.providers.resume_proc",
        json.dumps(config),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out.decode().splitlines()[-1])
    return result


@dataclass(frozen=True)
class Cut:
    name: str
    dialect: str
    #: the stream up to the cut (a DROP is appended)
    parts: Sequence[Part]
    plan: str
    #: block types the checkpoint keeps (and the resumed request carries), in order
    carried: list[str]
    #: the stream process B gets
    resume: Sequence[Part] = ()
    #: block types of the committed turn, and its text
    committed: list[str] = field(default_factory=list)
    text: str = ""
    #: process B's adapter claims prefill (a carried thinking block must override it)
    prefill: bool | None = None
    thinking: bool = True


def a_text(index: int, *chunks: str, closed: bool = False) -> list[Part]:
    parts: list[Part] = [aw.text_start(index), *[aw.text_delta(index, c) for c in chunks]]
    return [*parts, aw.block_stop(index)] if closed else parts


A_SEARCH = [
    aw.server_tool_use_start(1, "srvtoolu_01"),
    aw.tool_delta(1, '{"query": "paris weather"}'),
]
A_SEARCH_DONE = [*A_SEARCH, aw.block_stop(1)]
A_RESULT_DONE = [aw.web_search_result_start(2, "srvtoolu_01"), aw.block_stop(2)]


def a_answer(*first: Part, text: str) -> list[Part]:
    """A whole Anthropic turn: ``first`` (block 0), then the text ``text`` in block 1."""
    return [aw.message_start(), *first, *a_text(1, text, closed=True), *aw.message_end()]


def b_answer(*first: Part, text: str) -> list[Part]:
    """A whole Bedrock turn: ``first`` (block 0), then the text ``text`` in block 1."""
    return [
        bw.message_start(),
        *first,
        bw.text(1, text),
        bw.block_stop(1),
        bw.message_stop("end_turn"),
        bw.metadata(10, 5),
    ]


# What process B gets: a fresh answer (after R4), or the rest of a resumed one.
A_FRESH = a_answer(*aw.thinking_block(0, ["Paris."]), text="Mild.")
A_RESUME_THINKING = a_answer(*aw.thinking_block(0, ["Continue the forecast."]), text=" and sunny.")
A_RESUME_PLAIN = [aw.message_start(), *a_text(0, " and sunny.", closed=True), *aw.message_end()]
B_FRESH = b_answer(*bw.reasoning_block(0, ["Paris."]), text="Mild.")
B_RESUME = b_answer(*bw.reasoning_block(0, ["Continue the forecast."]), text=" and sunny.")

CUTS = [
    Cut(
        "inside-thinking",
        "anthropic",
        [
            aw.message_start(),
            *aw.thinking_block(0, ["Paris is ", "usually mi"], signed=False, closed=False),
        ],
        plan="R4",
        carried=[],
        resume=A_FRESH,
        committed=["thinking", "text"],
        text="Mild.",
    ),
    Cut(
        "right-after-thinking",
        "anthropic",
        [aw.message_start(), *aw.thinking_block(0, ["Paris in spring."])],
        plan="R4",
        carried=[],
        resume=A_FRESH,
        committed=["thinking", "text"],
        text="Mild.",
    ),
    Cut(
        "text-after-thinking",
        "anthropic",
        [
            aw.message_start(),
            *aw.thinking_block(0, ["Paris in spring."]),
            *a_text(1, "Paris is ", "mild"),
        ],
        plan="R1",
        carried=["thinking"],
        resume=A_RESUME_THINKING,
        committed=["thinking", "thinking", "text"],
        text="Paris is mild and sunny.",
        prefill=True,
    ),
    Cut(
        "inside-redacted-thinking",
        "anthropic",
        [aw.message_start(), aw.redacted_thinking_start(0, REDACTED_DATA)],
        plan="R4",
        carried=[],
        resume=a_answer(
            aw.redacted_thinking_start(0, REDACTED_DATA), aw.block_stop(0), text="Mild."
        ),
        committed=["redacted_thinking", "text"],
        text="Mild.",
    ),
    Cut(
        "text-after-redacted-thinking",
        "anthropic",
        [
            aw.message_start(),
            aw.redacted_thinking_start(0, REDACTED_DATA),
            aw.block_stop(0),
            *a_text(1, "Paris is ", "mild"),
        ],
        plan="R1",
        carried=["redacted_thinking"],
        resume=A_RESUME_THINKING,
        committed=["redacted_thinking", "thinking", "text"],
        text="Paris is mild and sunny.",
    ),
    Cut(
        "inside-server-tool-use",
        "anthropic",
        [aw.message_start(), *a_text(0, "Let me search.", closed=True), *A_SEARCH],
        plan="R1",
        carried=[],
        resume=A_RESUME_PLAIN,
        committed=["text"],
        text="Let me search. and sunny.",
        thinking=False,
    ),
    Cut(
        "inside-web-search-result",
        "anthropic",
        [
            aw.message_start(),
            *a_text(0, "Let me search.", closed=True),
            *A_SEARCH_DONE,
            aw.web_search_result_start(2, "srvtoolu_01"),
        ],
        plan="R1",
        carried=[],
        resume=A_RESUME_PLAIN,
        committed=["text"],
        text="Let me search. and sunny.",
        thinking=False,
    ),
    Cut(
        "text-after-server-tool",
        "anthropic",
        [
            aw.message_start(),
            *a_text(0, "Let me search.", closed=True),
            *A_SEARCH_DONE,
            *A_RESULT_DONE,
            *a_text(3, " Paris is mild"),
        ],
        plan="R1",
        carried=["server_tool_use", "web_search_tool_result"],
        resume=A_RESUME_PLAIN,
        committed=["server_tool_use", "web_search_tool_result", "text"],
        text="Let me search. Paris is mild and sunny.",
        thinking=False,
    ),
    Cut(
        "inside-reasoning-text",
        "bedrock",
        [bw.message_start(), bw.reasoning_text(0, "Paris is "), bw.reasoning_text(0, "usually mi")],
        plan="R4",
        carried=[],
        resume=B_FRESH,
        committed=["thinking", "text"],
        text="Mild.",
    ),
    Cut(
        "text-after-reasoning",
        "bedrock",
        [
            bw.message_start(),
            *bw.reasoning_block(0, ["Paris in spring."]),
            bw.text(1, "Paris is "),
            bw.text(1, "mild"),
        ],
        plan="R1",
        carried=["thinking"],
        resume=B_RESUME,
        committed=["thinking", "thinking", "text"],
        text="Paris is mild and sunny.",
        prefill=True,
    ),
    Cut(
        "inside-redacted-reasoning",
        "bedrock",
        [bw.message_start(), bw.redacted_reasoning(0, REDACTED_BYTES)],
        plan="R4",
        carried=[],
        resume=b_answer(bw.redacted_reasoning(0, REDACTED_BYTES), bw.block_stop(0), text="Mild."),
        committed=["redacted_thinking", "text"],
        text="Mild.",
    ),
    Cut(
        "text-after-redacted-reasoning",
        "bedrock",
        [
            bw.message_start(),
            bw.redacted_reasoning(0, REDACTED_BYTES),
            bw.block_stop(0),
            bw.text(1, "Paris is "),
            bw.text(1, "mild"),
        ],
        plan="R1",
        carried=["redacted_thinking"],
        resume=B_RESUME,
        committed=["redacted_thinking", "thinking", "text"],
        text="Paris is mild and sunny.",
    ),
    Cut(
        "inside-refusal",
        "openai",
        [ow.role(), ow.refusal("I can't "), ow.refusal("help")],
        plan="R4",
        carried=[],
        resume=[
            ow.role(),
            ow.refusal("I can't help with that."),
            ow.finish("stop"),
            ow.usage(10, 5),
            ow.DONE,
        ],
        committed=["text"],
        text="I can't help with that.",
        thinking=False,
    ),
    Cut(
        "inside-reasoning-content",
        "openai",
        [ow.role(), ow.reasoning("Paris is "), ow.reasoning("usually")],
        plan="R4",
        carried=[],
        resume=[
            ow.role(),
            ow.reasoning("Paris."),
            ow.text("Mild."),
            ow.finish("stop"),
            ow.usage(10, 5),
            ow.DONE,
        ],
        committed=["thinking", "text"],
        text="Mild.",
        thinking=False,
    ),
]


def block_type(block: dict[str, Any]) -> str:
    if block["type"] == "provider_block":
        return str(block["block"]["type"])
    return str(block["type"])


def sent_blocks(d: Dialect, message: dict[str, Any]) -> list[str]:
    """Block types of a message as the adapter sent it."""
    content = message["content"]
    if d.name == "anthropic":
        return [b["type"] for b in content]
    kinds = []
    for b in content:
        if "reasoningContent" in b:
            reasoning = b["reasoningContent"]
            kinds.append("thinking" if "reasoningText" in reasoning else "redacted_thinking")
        else:
            kinds.append(next(iter(b)))
    return kinds


@pytest.mark.parametrize("cut", CUTS, ids=lambda c: f"{c.dialect}-{c.name}")
async def test_a_cut_inside_a_new_block_kind_resumes_in_a_new_process(
    wire: WireServer, tmp_path: Path, cut: Cut
) -> None:
    d = by_name(cut.dialect)
    extra = EXTRA[d.name] if cut.thinking else {}
    if cut.thinking:
        # As the real APIs: a request that drops or alters reasoning is refused.
        wire.validate = (
            anthropic_thinking_rules if d.name == "anthropic" else bedrock_thinking_rules
        )
    outcome, checkpoint = await first_process(
        wire, d, tmp_path, d.stream(cut.parts, [DROP]), extra=extra
    )
    assert isinstance(outcome, TurnFailed) and outcome.error.code == "retry_budget_exhausted"
    assert plan_recovery(checkpoint).kind == cut.plan
    assert [block_type(b.model_dump()) for b in checkpoint.reusable_blocks] == cut.carried
    # Unsigned reasoning never reaches the checkpoint.
    assert "usually mi" not in checkpoint.model_dump_json()

    wire.push(d.stream(cut.resume))
    result = await new_process(wire, d, tmp_path, extra=extra, prefill=cut.prefill)
    assert result["kind"] == "completed", result
    assert result["plan_kind"] == cut.plan
    committed = Message.model_validate(result["message"])
    assert [block_type(b.model_dump()) for b in committed.content] == cut.committed
    assert committed.text == cut.text
    sent = wire.received[-1].json()
    if cut.plan == "R4":
        # The original request again: nothing of the cut attempt is carried.
        assert sent["messages"] == wire.received[0].json()["messages"]
    else:
        prefix, question = sent["messages"][-2], sent["messages"][-1]
        # Carried blocks in front of the prefix text, and, even when the adapter claims
        # prefill, a continue message after a prefix that carries reasoning.
        assert sent_blocks(d, prefix)[:-1] == cut.carried
        assert d.messages(wire.received[-1])[-1].text == CONTINUE_INSTRUCTION
        assert question["role"] == "user"


@pytest.mark.parametrize("layout", ["ollama", "gemini"])
async def test_openai_compatible_parallel_calls_cut_inside_the_second_resume_as_r2(
    wire: WireServer, tmp_path: Path, layout: str
) -> None:
    d = by_name("openai")
    index = 0 if layout == "ollama" else None
    parts: list[Part] = [
        ow.role(),
        ow.tool_fragment(
            index=index, call_id="call_A", name="get_weather", arguments='{"city": "Paris"}'
        ),
        ow.tool_fragment(
            index=index, call_id="call_B", name="get_weather", arguments='{"city": "Os'
        ),
        DROP,
    ]
    outcome, checkpoint = await first_process(wire, d, tmp_path, ow.stream(*parts), extra={})
    # One complete call: the turn is synthesised at once (R2), the broken one reported.
    assert isinstance(outcome, TurnCompleted)
    assert [(c.id, c.input) for c in outcome.message.tool_uses] == [("call_A", {"city": "Paris"})]
    assert [c.id for c in outcome.dropped_tool_calls] == ["call_B"]
    assert [(c.id, c.arguments) for c in checkpoint.tool_calls] == [
        ("call_A", '{"city": "Paris"}'),
        ("call_B", '{"city": "Os'),
    ]
    # A new process that finds the checkpoint synthesises the same turn, with no model call.
    result = await new_process(wire, d, tmp_path, extra={}, prefill=None)
    assert result["plan_kind"] == "R2" and result["dropped"] == ["call_B"]
    assert Message.model_validate(result["message"]) == outcome.message
    assert len(wire.received) == 1


async def test_openai_late_function_name_is_kept(wire: WireServer) -> None:
    d = by_name("openai")
    wire.push(
        ow.stream(
            ow.role(),
            ow.tool_fragment(index=0, call_id="call_A", arguments=""),
            ow.tool_fragment(index=0, name="get_weather"),
            ow.tool_fragment(index=0, arguments='{"city": "Oslo"}'),
            ow.finish("tool_calls"),
            ow.usage(10, 5),
            ow.DONE,
        )
    )
    runner = TurnRunner(d.provider(wire), InMemoryStreamCheckpointStore(), writer_id="w")
    outcome = await runner.run_turn(
        TurnRequest(run_id=RUN, thread_id=THREAD, turn=0, epoch=1, request=request(d))
    )
    assert isinstance(outcome, TurnCompleted)
    assert [(c.id, c.name, c.input) for c in outcome.message.tool_uses] == [
        ("call_A", "get_weather", {"city": "Oslo"})
    ]


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
async def test_a_tool_use_stop_whose_calls_were_all_dropped_is_retried(
    wire: WireServer, d: Dialect
) -> None:
    broken = [("call_A", "get_weather", ['{"city": ', '"Par'], True)]
    wire.push(
        d.stream(
            d.start(), d.text(["Checking."]), d.tools(broken, first_block=1), d.end("tool_use")
        ),
        d.text_turn([" Paris is mild."]),
    )
    runner = TurnRunner(
        d.provider(wire), InMemoryStreamCheckpointStore(), writer_id="w", sleep=_no_sleep
    )
    outcome = await runner.run_turn(
        TurnRequest(run_id=RUN, thread_id=THREAD, turn=0, epoch=1, request=request(d))
    )
    assert isinstance(outcome, TurnCompleted)
    assert outcome.stop_reason == "end_turn"
    assert outcome.message.text == "Checking. Paris is mild."
    assert [c.id for c in outcome.dropped_tool_calls] == ["call_A"]
    assert outcome.retry_count == 1
    assert "call_A" not in wire.received[1].body.decode()


async def _no_sleep(delay: float) -> None:
    return None


# -- complete turns: what the adapters emit and commit ------------------------------


async def test_anthropic_thinking_deltas_are_stream_events(wire: WireServer) -> None:
    d = by_name("anthropic")
    wire.push(
        aw.stream(
            aw.message_start(),
            *aw.thinking_block(0, ["a", "b", "c"]),
            *a_text(1, "Hi", closed=True),
            *aw.message_end(),
        )
    )
    events, error = await collect(d.provider(wire), request(d))
    assert error is None
    # Each thinking delta is an event: the runner's idle watchdog sees a thinking model
    # as alive, however long it thinks before the first text.
    kinds = [type(e).__name__ for e in events]
    assert kinds[:7] == ["UsageEvent", *["ReasoningDelta"] * 5, "ReasoningEnd"]


async def test_bedrock_counts_cache_reads_and_writes(wire: WireServer) -> None:
    d = by_name("bedrock")
    wire.push(
        bw.stream(
            bw.message_start(),
            bw.text(0, "Hi"),
            bw.message_stop("end_turn"),
            bw.metadata_with_cache(12, 3, 400, 50),
        )
    )
    runner = TurnRunner(d.provider(wire), InMemoryStreamCheckpointStore(), writer_id="w")
    outcome = await runner.run_turn(
        TurnRequest(run_id=RUN, thread_id=THREAD, turn=0, epoch=1, request=request(d))
    )
    assert isinstance(outcome, TurnCompleted)
    usage = outcome.usage
    assert (usage.input_tokens, usage.output_tokens) == (12, 3)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (400, 50)


async def test_anthropic_prefill_refused_with_thinking_on_falls_back_to_a_continue_message(
    wire: WireServer,
) -> None:
    # The model skipped thinking (adaptive), so the prefix carries none; the instance
    # claims prefill; the API refuses it with the thinking-on wording.
    d = by_name("anthropic")
    wire.validate = anthropic_thinking_rules
    wire.push(
        aw.stream(aw.message_start(), *a_text(0, "Paris is ", "mild"), DROP),
        aw.stream(aw.message_start(), *a_text(0, " today.", closed=True), *aw.message_end()),
    )
    runner = TurnRunner(
        d.provider(wire, prefill=True, extra=EXTRA["anthropic"]),
        InMemoryStreamCheckpointStore(),
        writer_id="w",
        sleep=_no_sleep,
    )
    outcome = await runner.run_turn(
        TurnRequest(run_id=RUN, thread_id=THREAD, turn=0, epoch=1, request=request(d))
    )
    assert isinstance(outcome, TurnCompleted)
    assert outcome.message.text == "Paris is mild today."
    rejected, accepted = wire.received[1].json(), wire.received[2].json()
    assert rejected["messages"][-1]["role"] == "assistant"
    assert accepted["messages"][-1]["content"][0]["text"] == CONTINUE_INSTRUCTION
