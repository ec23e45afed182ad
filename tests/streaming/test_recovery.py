"""The R1-R4 recovery table and the complete-call rule, on the pure planner."""

from __future__ import annotations

import pytest

from awaken_s3.messages import TextBlock, ToolUseBlock
from awaken_s3.models import PartialToolCall
from awaken_s3.streaming.recovery import plan_recovery, synthesized_turn

from .conftest import saved


def call(
    index: int, arguments: str, *, closed: bool = True, name: str = "lookup"
) -> PartialToolCall:
    return PartialToolCall(
        index=index, id=f"call_{index}", name=name, arguments=arguments, closed=closed
    )


def test_r1_text_only_continues_from_the_text() -> None:
    plan = plan_recovery(saved(partial_text="The answer is"))
    assert plan.kind == "R1"
    assert plan.prefix_text == "The answer is"
    assert plan.tool_calls == () and plan.dropped == ()


def test_r2_complete_call_is_synthesized_with_text_and_stream_order() -> None:
    checkpoint = saved(
        partial_text="Let me check.",
        tool_calls=(call(1, '{"city": "Oslo"}'), call(0, '{"q": 1}', closed=False)),
    )
    plan = plan_recovery(checkpoint)
    assert plan.kind == "R2"
    assert not plan.needs_model_call
    assert [c.id for c in plan.tool_calls] == ["call_0", "call_1"]
    assert plan.tool_calls[0].input == {"q": 1}  # unclosed but a complete object: usable
    message = synthesized_turn(plan)
    assert message.role == "assistant"
    assert message.content == (
        TextBlock(text="Let me check."),
        ToolUseBlock(id="call_0", name="lookup", input={"q": 1}),
        ToolUseBlock(id="call_1", name="lookup", input={"city": "Oslo"}),
    )


def test_r2_complete_call_followed_by_a_broken_one_keeps_the_complete_one() -> None:
    plan = plan_recovery(
        saved(partial_text="", tool_calls=(call(0, '{"a": 1}'), call(1, '{"b": ', closed=False)))
    )
    assert plan.kind == "R2"
    assert [c.input for c in plan.tool_calls] == [{"a": 1}]
    assert [(d.index, d.id) for d in plan.dropped] == [(1, "call_1")]
    assert synthesized_turn(plan).content == (
        ToolUseBlock(id="call_0", name="lookup", input={"a": 1}),
    )


def test_r3_text_with_only_broken_calls_drops_every_one_and_reports_all() -> None:
    broken = (
        call(0, '{"path": "/tm', closed=False),
        call(1, '{"x": 1,,}', closed=True),  # malformed, though closed
        call(2, "", closed=False),  # started, no arguments, never closed
        call(3, "[1, 2]", closed=True),  # valid JSON, not an object
    )
    plan = plan_recovery(saved(partial_text="I'll run three tools.", tool_calls=broken))
    assert plan.kind == "R3"
    assert plan.prefix_text == "I'll run three tools."
    assert plan.tool_calls == ()
    assert [d.index for d in plan.dropped] == [0, 1, 2, 3]
    assert all(d.reason for d in plan.dropped)


def test_r4_nothing_reusable_restarts_without_prefix() -> None:
    plan = plan_recovery(saved(partial_text="", tool_calls=(call(0, '{"a"', closed=False),)))
    assert plan.kind == "R4"
    assert plan.prefix_text == ""
    assert [d.index for d in plan.dropped] == [0]
    assert plan_recovery(saved()).kind == "R4"


@pytest.mark.parametrize("text", [" ", "\n\n", " \t\n "])
def test_whitespace_only_text_is_not_reusable(text: str) -> None:
    assert plan_recovery(saved(partial_text=text)).kind == "R4"
    with_broken = saved(partial_text=text, tool_calls=(call(0, "{", closed=False),))
    assert plan_recovery(with_broken).kind == "R4"
    with_complete = plan_recovery(saved(partial_text=text, tool_calls=(call(0, "{}"),)))
    assert with_complete.kind == "R2"
    assert synthesized_turn(with_complete).text == ""


def test_closed_call_with_empty_arguments_is_an_empty_object() -> None:
    plan = plan_recovery(saved(tool_calls=(call(0, "", closed=True),)))
    assert plan.kind == "R2"
    assert plan.tool_calls[0].input == {}


def test_unclosed_call_with_empty_arguments_is_dropped() -> None:
    plan = plan_recovery(saved(partial_text="Hm", tool_calls=(call(0, "", closed=False),)))
    assert plan.kind == "R3"
    assert plan.dropped[0].index == 0


def test_a_call_without_a_name_cannot_be_executed() -> None:
    plan = plan_recovery(saved(tool_calls=(call(0, "{}", name=""),)))
    assert plan.kind == "R4"
    assert plan.dropped[0].reason == "missing tool name or id"


def test_synthesizing_needs_an_r2_plan() -> None:
    with pytest.raises(ValueError):
        synthesized_turn(plan_recovery(saved(partial_text="x")))
