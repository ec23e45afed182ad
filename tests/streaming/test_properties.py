"""Property tests: random event scripts cut at random points.

For any partial turn: the plan follows the R1-R4 table, the final turn starts
with the saved text, and no incomplete tool call ever appears in a returned turn
(whether the cut came from a crash, resumed from a checkpoint, or from an
in-process interruption).
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken_s3.streaming.accumulator import StreamAccumulator
from awaken_s3.streaming.events import (
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.outcome import TurnCompleted
from awaken_s3.streaming.recovery import plan_recovery
from awaken_s3.streaming.scripted import Drop, ScriptedProvider, ScriptStep, tool_call
from tests.fixtures.clock import FakeClock

from .conftest import RUN_ID, THREAD_ID, CountingStore, RecordingSleep, make_runner, run

TEXT = st.text(
    alphabet=st.characters(codec="utf-8", categories=("L", "M", "N", "P", "S", "Zs")),
    min_size=1,
    max_size=8,
)
GOOD_ARGS = st.dictionaries(
    st.text(max_size=4), st.integers() | st.text(max_size=4) | st.none(), max_size=3
).map(json.dumps)
BROKEN_OR_ODD_ARGS = ["", " ", "{", '{"a": ', "[1]", "{oops}", "null", '"s"', "{}"]
ANY_ARGS = GOOD_ARGS | st.sampled_from(BROKEN_OR_ODD_ARGS)


@dataclass
class Oracle:
    """What a partial turn holds, computed independently of the accumulator."""

    text: str = ""
    args: dict[int, str] = field(default_factory=dict)
    ids: dict[int, str] = field(default_factory=dict)
    closed: set[int] = field(default_factory=set)

    def feed(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.text += event.text
        elif isinstance(event, ToolCallStart):
            self.ids[event.index] = event.id
            self.args.setdefault(event.index, "")
        elif isinstance(event, ToolCallDelta):
            self.args[event.index] = self.args.get(event.index, "") + event.arguments
        elif isinstance(event, ToolCallEnd):
            self.closed.add(event.index)

    def complete(self) -> dict[str, dict[str, Any]]:
        """id -> parsed input, for calls that may be executed."""
        result: dict[str, dict[str, Any]] = {}
        for index, call_id in self.ids.items():
            raw = self.args[index]
            if not raw.strip():
                if index in self.closed:
                    result[call_id] = {}
                continue
            try:
                parsed = json.loads(raw)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                result[call_id] = parsed
        return result

    def incomplete_ids(self) -> set[str]:
        return set(self.ids.values()) - set(self.complete())

    def expected_kind(self) -> str:
        if self.complete():
            return "R2"
        if self.text.strip():
            return "R3" if self.ids else "R1"
        return "R4"


@st.composite
def scripts(draw: st.DrawFn, tag: str) -> list[StreamEvent]:
    """A whole turn: text and tool calls interleaved as on the wire, then usage and stop."""
    streams: list[list[StreamEvent]] = [[TextDelta(t) for t in draw(st.lists(TEXT, max_size=6))]]
    for index in range(draw(st.integers(0, 3))):
        streams.append(
            tool_call(
                index,
                "tool",
                draw(ANY_ARGS),
                call_id=f"{tag}{index}",
                chunk=draw(st.integers(1, 6)),
                close=draw(st.booleans()),
            )
        )
    rng = random.Random(draw(st.integers(0, 2**32)))
    merged: list[StreamEvent] = []
    live = [list(s) for s in streams if s]
    while live:
        pick = rng.choice(live)
        merged.append(pick.pop(0))
        live = [s for s in live if s]
    return [*merged, UsageEvent(5, 5), StopEvent("end_turn")]


def fold(events: list[StreamEvent]) -> tuple[StreamAccumulator, Oracle]:
    acc, oracle = StreamAccumulator(), Oracle()
    for event in events:
        acc.apply(event)
        oracle.feed(event)
    return acc, oracle


def run_sync(coro: Any) -> Any:
    return asyncio.run(coro)


PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(data=st.data())
def test_the_plan_follows_the_table(data: st.DataObject) -> None:
    events = data.draw(scripts("a"))
    cut = data.draw(st.integers(0, len(events)))
    acc, oracle = fold(events[:cut])
    snapshot = acc.snapshot(
        run_id=RUN_ID, thread_id=THREAD_ID, model="m", turn=0, retry_count=0, epoch=1, writer="w"
    )
    plan = plan_recovery(snapshot)
    assert plan.kind == oracle.expected_kind()
    assert {c.id: c.input for c in plan.tool_calls} == (
        oracle.complete() if plan.kind == "R2" else {}
    )
    assert {d.id for d in plan.dropped} == oracle.incomplete_ids()
    if plan.kind in ("R1", "R3"):
        assert plan.prefix_text == oracle.text


@PROPS
@given(data=st.data(), prefill=st.booleans())
def test_a_resumed_turn_starts_with_the_saved_text_and_runs_only_complete_calls(
    data: st.DataObject, prefill: bool
) -> None:
    first = data.draw(scripts("a"))
    cut = data.draw(st.integers(0, len(first)))
    acc, saved_oracle = fold(first[:cut])
    continuation = data.draw(scripts("b"))
    _, cont_oracle = fold(continuation)
    provider = ScriptedProvider([continuation], prefill=prefill)

    async def scenario() -> TurnCompleted:
        store = CountingStore()
        checkpoint = acc.snapshot(
            run_id=RUN_ID,
            thread_id=THREAD_ID,
            model="test-model",
            turn=0,
            retry_count=0,
            epoch=1,
            writer="dead",
        )
        await store.put(checkpoint, expected_version=None)
        clock = FakeClock()
        outcome = await run(make_runner(provider, store, clock, RecordingSleep(clock)))
        assert isinstance(outcome, TurnCompleted), outcome
        return outcome

    outcome = run_sync(scenario())
    kind = saved_oracle.expected_kind()
    assert outcome.plan_kind == kind
    executed = {b.id: b.input for b in outcome.message.tool_uses}
    if kind == "R2":
        assert provider.calls == 0
        assert executed == saved_oracle.complete()
        assert outcome.message.text == (saved_oracle.text if saved_oracle.text.strip() else "")
        return
    saved_text = saved_oracle.text if kind in ("R1", "R3") else ""
    assert outcome.message.text.startswith(saved_text)
    assert executed == cont_oracle.complete()
    assert not set(executed) & (saved_oracle.incomplete_ids() | cont_oracle.incomplete_ids())


@PROPS
@given(data=st.data())
def test_an_in_process_interruption_never_executes_an_incomplete_call(
    data: st.DataObject,
) -> None:
    first = data.draw(scripts("a"))
    cut = data.draw(st.integers(0, len(first) - 2))  # before the stop event
    second = data.draw(scripts("b"))
    _, cut_oracle = fold(first[:cut])
    _, second_oracle = fold(second)
    interrupted: list[ScriptStep] = [*first[:cut], Drop()]
    provider = ScriptedProvider([interrupted, second], prefill=data.draw(st.booleans()))

    async def scenario() -> TurnCompleted:
        clock = FakeClock()
        outcome = await run(make_runner(provider, CountingStore(), clock, RecordingSleep(clock)))
        assert isinstance(outcome, TurnCompleted), outcome
        return outcome

    outcome = run_sync(scenario())
    executed = {b.id: b.input for b in outcome.message.tool_uses}
    if cut_oracle.complete():
        assert provider.calls == 1
        assert executed == cut_oracle.complete()
    else:
        assert provider.calls == 2
        kept = cut_oracle.text if cut_oracle.text.strip() else ""
        assert outcome.message.text.startswith(kept)
        assert executed == second_oracle.complete()
    dropped = {d.id for d in outcome.dropped_tool_calls}
    assert not set(executed) & (cut_oracle.incomplete_ids() | second_oracle.incomplete_ids())
    assert cut_oracle.incomplete_ids() <= dropped
