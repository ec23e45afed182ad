"""The kill soak in the suite: a budget that fits CI (benchmarks/kill_soak.py runs it longer),
and the checker itself, shown to catch each violation it exists for."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.messages import Message, TextBlock, ToolResultBlock
from awaken_s3.runtime.tools import OUTCOME_UNKNOWN
from tests.soak.harness import (
    SoakConfig,
    effect_key,
    recovery_samples,
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


def claim(run: str, pid: int, at: float, message: str, **more: Any) -> dict[str, Any]:
    return {"ev": "claim", "run_id": run, "pid": pid, "at": at, "message_id": message, **more}


def test_a_holder_s_death_is_measured_to_the_next_claim_of_its_run() -> None:
    leases = [
        claim("r", 1, 10.0, "m", receive_count=1, reason="start"),
        claim("r", 2, 14.5, "m", receive_count=2, reason="start", handler_at=14.4),
    ]
    kills = [{"run_id": "r", "pid": 1, "at": 11.0, "message_id": "m", "receive_count": 1}]
    [sample] = recovery_samples(kills, [], leases, lease=3.0, max_receive_count=5)
    assert (sample.path, sample.driver) == ("holder_died", "own record")
    assert sample.leases == pytest.approx(3.5 / 3) and sample.start == pytest.approx(0.1)


def test_only_a_kill_that_left_its_run_undriven_is_a_recovery() -> None:
    leases = [
        claim("r", 1, 10.0, "m", receive_count=1),
        {"ev": "release", "run_id": "r", "pid": 1, "at": 12.0, "message_id": "m"},
        claim("r", 2, 20.0, "c", receive_count=1, reason="continue"),
    ]
    # Killed after it had handed the run over: the continuation drives it, nothing to measure.
    after_release = {"run_id": "r", "pid": 1, "at": 13.0, "message_id": "m", "receive_count": 1}
    # A duplicate that died before its claim while a live worker held the run.
    duplicate = {
        "run_id": "r",
        "pid": 3,
        "at": 21.0,
        "message_id": "d",
        "receive_count": 1,
        "point": "before_claim",
    }
    assert (
        recovery_samples([after_release, duplicate], [], leases, lease=3.0, max_receive_count=5)
        == []
    )


def test_a_chain_of_deaths_is_measured_death_by_death() -> None:
    # The holder dies; its record's next receiver dies before it can claim (having hidden the
    # record); a third worker claims. Each death is measured to the next attempt.
    leases = [
        claim("r", 1, 0.0, "m", receive_count=1),
        {"ev": "hidden", "run_id": "r", "pid": 2, "at": 4.1, "message_id": "m", "receive_count": 2},
        claim("r", 3, 8.0, "m", receive_count=3, reason="start"),
    ]
    kills = [
        {"run_id": "r", "pid": 1, "at": 0.5, "message_id": "m", "receive_count": 1},
        {"run_id": "r", "pid": 2, "at": 4.2, "message_id": "m", "receive_count": 2},
    ]
    first, second = recovery_samples(kills, [], leases, lease=3.0, max_receive_count=5)
    assert first.path == "holder_died" and first.seconds == pytest.approx(3.7)
    assert second.path == "before_claim" and second.seconds == pytest.approx(3.8)
    # Without the hidden batch it died "in init", as far as the queue can tell; out of
    # receives, its record went to the dead-letter queue and the sweeper re-sent the run.
    leases[1] = {**leases[1], "pid": 9}
    leases[2] = {**leases[2], "message_id": "s", "reason": "rescue"}
    kills[1] = {**kills[1], "receive_count": 5}
    _, late = recovery_samples(kills, [], leases, lease=3.0, max_receive_count=5)
    assert (late.path, late.driver) == ("dead_lettered", "sweeper")


@pytest.mark.slow
@pytest.mark.minutes
def test_kill_soak(tmp_path: Path) -> None:
    # A standard queue, then a FIFO one: one after the other, since the soak runs the
    # template's timings 20 times faster and two at once would starve each other's workers
    # of this 2-core machine's time (deaths nobody planned: timed-out invocations).
    for fifo in (False, True):
        soak(tmp_path / ("fifo" if fifo else "standard"), fifo=fifo)


def soak(workdir: Path, *, fifo: bool) -> None:
    # About 30 recoveries each: a p99 that is their maximum. A death during init (one
    # invocation in 500 in the long run, 2.5 leases each) is left to the long run.
    config = SoakConfig(
        runs=8 if not fifo else 5, seed=11 if not fifo else 12, fifo=fifo, init_kill_weight=0
    )
    workdir.mkdir()
    report = run_soak(config, workdir)
    print(report.summary())
    assert report.violations == [], report.summary()
    # The soak did what it is for: workers died (inside and outside), runs raced, objects
    # were deleted under their writers and planted in their place, and still every run ended.
    assert report.kills >= 10, report.summary()
    assert report.kills_outside > 0 and sum(report.kills_inside.values()) > 0
    assert report.actions["deleted_under_writer"] > 0
    assert report.runs == config.runs and report.turns >= 2 * config.runs
    # Every crash was resumed: the kills were followed by claims. How fast is a measurement of
    # this machine as much as of the recovery paths (at 20 times the template's speed, a second
    # a loaded machine withholds is 20 s of Lambda time), so the suite says the figures and
    # judges none of them: the bounds (p99 <= 2 and max <= 3 lease periods) are judged by
    # benchmarks/kill_soak.py on a quiet machine, its figures recorded in RELIABILITY.md, and
    # each recovery path's bound is derived from the template's defaults
    # (awaken_s3.service.liveness, checked in tests/infra) and driven path by path in
    # tests/local/test_recovery_paths.py.
    assert len(report.recoveries) >= 10, report.summary()
    p99, worst = report.recovery_leases(99), report.recovery_leases(100)
    assert p99 is not None and worst is not None
    print(
        f"kill -> next claim p99 {p99:.2f}, max {worst:.2f} lease periods "
        f"({report.starved} invocations timed out unfrozen)"
    )
