"""The kill soak in the suite: a budget that fits CI (benchmarks/kill_soak.py runs it longer),
and the checker itself, shown to catch each violation it exists for."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from awaken_s3.messages import Message, TextBlock, ToolResultBlock
from awaken_s3.runtime.tools import OUTCOME_UNKNOWN
from tests.soak.harness import (
    SoakConfig,
    effect_key,
    resume_latencies,
    run_soak,
    stray_effects,
    thread_problems,
)
from tests.soak.script import ADD, TurnSpec, assistant_message, expected_messages, script_for

SCRIPT = script_for(7, prefill=False)


def first_calls() -> tuple[int, int]:
    """Indices of the first turn with tool calls, and of its results message."""
    for turn, spec in enumerate(SCRIPT.turns):
        if spec.calls:
            return turn, 2 * turn + 2
    raise AssertionError("the script has no tool turn")


def effects_of(messages: list[Message]) -> Counter[str]:
    ran: Counter[str] = Counter()
    for spec in SCRIPT.turns:
        for call in spec.calls:
            ran[effect_key(call)] += 1
    return ran


def test_the_scripted_thread_passes() -> None:
    messages = expected_messages(SCRIPT)
    assert list(thread_problems(SCRIPT, messages, effects_of(messages))) == []


def test_a_turn_committed_twice_is_caught() -> None:
    messages = expected_messages(SCRIPT)
    doubled = [*messages[:2], messages[1], *messages[2:]]
    assert list(thread_problems(SCRIPT, doubled, effects_of(messages)))


def test_a_continuation_only_or_echoed_turn_is_caught() -> None:
    messages = expected_messages(SCRIPT)
    whole = SCRIPT.turns[0].text
    for text in (whole[len(whole) // 2 :], whole[:20] + whole[10:]):
        broken = list(messages)
        content = (TextBlock(text=text), *messages[1].content[1:])
        broken[1] = Message(role="assistant", content=content)
        assert any(
            "not the scripted whole turn" in p
            for p in thread_problems(SCRIPT, broken, effects_of(messages))
        )


def test_a_tool_turn_cut_between_parallel_calls_may_keep_the_complete_ones() -> None:
    # R2: the calls complete when the crash came are committed, the rest dropped and never run.
    turn, results_at = first_calls()
    spec = SCRIPT.turns[turn]
    if len(spec.calls) < 2:
        pytest.skip("the script's first tool turn has one call")
    messages = expected_messages(SCRIPT)
    kept = spec.calls[:1]
    truncated = list(messages)
    truncated[results_at - 1] = assistant_message(TurnSpec(spec.text, kept))
    truncated[results_at] = Message(
        role="user",
        content=tuple(b for b in messages[results_at].content[:1]),
    )
    ran = effects_of(messages)
    for call in spec.calls[1:]:
        ran[effect_key(call)] = 0
    assert list(thread_problems(SCRIPT, truncated, ran)) == []
    ran[effect_key(spec.calls[1])] = 1  # a dropped call must never run
    assert list(thread_problems(SCRIPT, truncated, ran))
    # Dropping the first call and keeping a later one is not a cut: it is caught.
    reordered = list(truncated)
    reordered[results_at - 1] = assistant_message(TurnSpec(spec.text, spec.calls[1:2]))
    assert list(thread_problems(SCRIPT, reordered, effects_of(messages)))


def test_tool_runs_are_checked_against_their_promises() -> None:
    messages = expected_messages(SCRIPT)
    turn, _ = first_calls()
    calls = SCRIPT.turns[turn].calls
    ran = effects_of(messages)
    for call in calls:
        twice = Counter(ran)
        twice[effect_key(call)] = 2 if call.name == ADD else 0
        assert list(thread_problems(SCRIPT, messages, twice)), call
    # An "outcome unknown" result for the non-idempotent tool is honest, whether it ran or not.
    adds = [c for c in calls if c.name == ADD]
    if adds:
        unknown = list(messages)
        _, results_at = first_calls()
        blocks = tuple(
            ToolResultBlock(tool_use_id=b.tool_use_id, content=OUTCOME_UNKNOWN, is_error=True)
            if b.tool_use_id == adds[0].id
            else b
            for b in unknown[results_at].content
            if isinstance(b, ToolResultBlock)
        )
        unknown[results_at] = Message(role="user", content=blocks)
        for count in (0, 1):
            ran_or_not = Counter(ran)
            ran_or_not[effect_key(adds[0])] = count
            assert list(thread_problems(SCRIPT, unknown, ran_or_not)) == []


def test_an_incomplete_call_that_ran_is_caught_by_its_arguments() -> None:
    calls = [c for spec in SCRIPT.turns for c in spec.calls]
    known = {effect_key(c) for c in calls}
    ran = Counter(known)
    assert stray_effects(known, ran) == []
    # A call cut inside its arguments, had it run, would have run with other arguments.
    cut = dataclasses.replace(calls[0], input={k: str(v)[:-1] for k, v in calls[0].input.items()})
    ran[effect_key(cut)] += 1
    assert stray_effects(known, ran) == [
        f"a tool ran with arguments no complete call had: {effect_key(cut)} (1x)"
    ]


def test_resume_latency_is_measured_to_the_first_token_after_each_kill() -> None:
    kills = [{"run_id": "soak-7", "at": 10.0}, {"run_id": "soak-7", "at": 30.0}]
    starts = [{"seed": 7, "at": t} for t in (1.0, 14.5, 15.0, 33.0)]
    assert resume_latencies(kills, starts) == [4.5, 3.0]


@pytest.mark.slow
@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_kill_soak(tmp_path: Path, fifo: bool) -> None:
    config = SoakConfig(runs=8 if not fifo else 5, seed=11 if not fifo else 12, fifo=fifo)
    report = run_soak(config, tmp_path)
    print(report.summary())
    assert report.violations == [], report.summary()
    # The soak did what it is for: workers died (inside and outside), runs raced, objects
    # were deleted under their writers and planted in their place, and still every run ended.
    assert report.kills >= 10, report.summary()
    assert report.kills_outside > 0 and sum(report.kills_inside.values()) > 0
    assert report.actions["deleted_under_writer"] > 0
    assert report.runs == config.runs and report.turns >= 2 * config.runs
