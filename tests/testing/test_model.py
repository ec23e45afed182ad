"""The scripted model of awaken_s3.testing: it calls the tools a turn offers, answers with
their results, continues exactly from any prefix a resume sends (both continuation shapes the
runner builds), and stops where a kill point says, at an exact place of the stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from awaken_s3.messages import Message, ToolResultBlock, ToolUseBlock
from awaken_s3.streaming.continuation import build_continuation_request, join_at_seam
from awaken_s3.streaming.events import (
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from awaken_s3.streaming.provider import ModelRequest, ToolSpec
from awaken_s3.testing.kills import KillPoint, StreamState
from awaken_s3.testing.model import (
    DEFAULT_CLOSING,
    ScriptedCall,
    ToolCallingModel,
    example_arguments,
    run_turn,
)

LOOKUP = ToolSpec(
    "lookup_order",
    "Find an order.",
    {
        "type": "object",
        "properties": {"order_id": {"type": "string", "examples": ["A-17"]}},
        "required": ["order_id"],
    },
)
TICKET = ToolSpec(
    "open_ticket",
    "Open a ticket.",
    {
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "urgent": {"type": "boolean", "default": False},
            "tier": {"enum": ["gold", "silver"]},
        },
        "required": ["summary", "tier"],
    },
)
QUESTION = Message.user("Where is my order A-17?")


def collect(model: ToolCallingModel, request: ModelRequest) -> list[StreamEvent]:
    async def go() -> list[StreamEvent]:
        return [event async for event in model.stream(request)]

    return asyncio.run(go())


def text_of(events: Sequence[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def after_tools(results: dict[str, str]) -> list[Message]:
    """The thread after the tool turn: the question, the calls, their results."""
    uses = [ToolUseBlock(id=f"c-{name}", name=name, input={}) for name in results]
    answers = [
        ToolResultBlock(tool_use_id=f"c-{name}", content=content)
        for name, content in results.items()
    ]
    return [
        QUESTION,
        Message(role="assistant", content=uses),
        Message(role="user", content=answers),
    ]


def test_a_turn_that_offers_tools_calls_each_with_arguments_from_its_schema() -> None:
    events = collect(
        ToolCallingModel(), ModelRequest(model="m", messages=[QUESTION], tools=[LOOKUP, TICKET])
    )
    assert text_of(events) == "Let me call lookup_order, open_ticket first. "
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [s.name for s in starts] == ["lookup_order", "open_ticket"]
    arguments = {
        index: "".join(
            e.arguments for e in events if isinstance(e, ToolCallDelta) and e.index == index
        )
        for index in (1, 2)
    }
    assert json.loads(arguments[1]) == {"order_id": "A-17"}
    assert json.loads(arguments[2]) == {"summary": "example", "tier": "gold"}
    assert len([e for e in events if isinstance(e, ToolCallEnd)]) == 2
    assert events[-1] == StopEvent("tool_use")


def test_scripted_calls_replace_the_schema_s_examples() -> None:
    model = ToolCallingModel(calls=[ScriptedCall("lookup_order", {"order_id": "Z-99"})])
    events = collect(model, ModelRequest(model="m", messages=[QUESTION], tools=[LOOKUP, TICKET]))
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["lookup_order"]
    no_calls = collect(
        ToolCallingModel(calls=[]), ModelRequest(model="m", messages=[QUESTION], tools=[LOOKUP])
    )
    assert text_of(no_calls) == DEFAULT_CLOSING


def test_the_answer_quotes_the_tools_and_ends_with_the_closing() -> None:
    history = after_tools({"lookup_order": '{"status": "shipped"}', "open_ticket": "opened"})
    events = collect(ToolCallingModel(), ModelRequest(model="m", messages=history, tools=[LOOKUP]))
    assert text_of(events) == (
        'lookup_order said: {"status": "shipped"}\nopen_ticket said: opened\n\n' + DEFAULT_CLOSING
    )
    assert events[-1] == StopEvent("end_turn")


@pytest.mark.parametrize("prefill", [True, False])
@pytest.mark.parametrize("cut", [1, 17, 41, 80, 150])
def test_a_resume_continues_the_answer_exactly_where_the_prefix_stops(
    prefill: bool, cut: int
) -> None:
    history = after_tools({"lookup_order": '{"status": "shipped"}'})
    model = ToolCallingModel(prefill=prefill)
    request = ModelRequest(model="m", messages=history, tools=[LOOKUP])
    whole = text_of(collect(model, request))
    prefix = whole[:cut]
    resumed = build_continuation_request(request, prefix, prefill=prefill)
    continuation = text_of(collect(model, resumed))
    assert join_at_seam(prefix, continuation, trim_echo=not prefill) == whole


def test_a_resume_of_a_tool_turn_cut_in_its_text_calls_the_tools_again() -> None:
    # R3: the saved text is kept, the broken calls dropped; the model goes on from the text.
    request = ModelRequest(model="m", messages=[QUESTION], tools=[LOOKUP])
    whole = collect(ToolCallingModel(), request)
    resumed = build_continuation_request(request, text_of(whole)[:10], prefill=False)
    again = collect(ToolCallingModel(), resumed)
    assert join_at_seam(text_of(whole)[:10], text_of(again), trim_echo=True) == text_of(whole)
    assert [e.name for e in again if isinstance(e, ToolCallStart)] == ["lookup_order"]


def test_turns_count_from_the_caller_s_latest_message() -> None:
    history = after_tools({"lookup_order": "x"})
    assert run_turn([QUESTION]) == 1
    assert run_turn(history) == 2
    assert run_turn([*history, Message.assistant("done"), Message.user("And B-42?")]) == 1


def stop_positions(model: ToolCallingModel, request: ModelRequest) -> list[tuple[int, str]]:
    """(kill point, what the stream had sent when the model reached it)."""
    reached: list[tuple[int, str]] = []
    sent: list[StreamEvent] = []

    async def note(index: int, state: StreamState) -> None:
        args = "".join(e.arguments for e in sent if isinstance(e, ToolCallDelta))
        reached.append((index, f"{text_of(sent)}|{args}"))

    model.on_kill_point = note

    async def go() -> None:
        async for event in model.stream(request):
            sent.append(event)

    asyncio.run(go())
    return reached


def test_kill_points_stop_the_stream_at_their_exact_place() -> None:
    request = ModelRequest(model="m", messages=[QUESTION], tools=[LOOKUP, TICKET])
    model = ToolCallingModel(
        kill_points=[
            KillPoint.text(7),
            KillPoint.inside_tool_call("open_ticket"),
            KillPoint.tool_calls_done(),
            KillPoint.text(7, turn=2),  # another turn: not this one
        ]
    )
    arguments_1 = json.dumps({"order_id": "A-17"})
    arguments_2 = json.dumps({"summary": "example", "tier": "gold"})
    intro = "Let me call lookup_order, open_ticket first. "
    assert stop_positions(model, request) == [
        (0, "Let me |"),
        (1, f"{intro}|{arguments_1}{arguments_2[: len(arguments_2) // 2]}"),
        (2, f"{intro}|{arguments_1}{arguments_2}"),
    ]
    # A resumed stream whose prefix is past a text point does not stop there again.
    resumed = build_continuation_request(request, intro[:12], prefill=False)
    assert [index for index, _ in stop_positions(model, resumed)] == [1, 2]


def test_example_arguments_fill_every_required_field() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "when": {"anyOf": [{"type": "null"}, {"type": "string", "default": "now"}]},
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
            "optional": {"type": "string"},
        },
        "required": ["n", "when", "items"],
        "$defs": {
            "Item": {"type": "object", "properties": {"sku": {"const": "x"}}, "required": ["sku"]}
        },
    }
    assert example_arguments(schema) == {"n": 1, "when": "now", "items": [{"sku": "x"}]}
