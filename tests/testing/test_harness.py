"""The `awaken` fixture as a project's tests use it (this folder's conftest.py overrides the app
and the tools' environment, as a user's would): runs through the real API and worker handlers
on moto, the worker killed at each kind of kill point and the run resumed by a new container,
each tool run at most once."""

from __future__ import annotations

import pytest

from awaken_s3.runtime.tools import OUTCOME_UNKNOWN
from awaken_s3.testing import Harness, KillPoint, RunOutcome

pytestmark = pytest.mark.slow


def resumed_once_killed(run: RunOutcome) -> bool:
    # One death, then invocations that ended normally: how many depends on whether the first
    # found the dead worker's lease still running (it hands its record back for later).
    return (
        run.invocations[0] == "killed"
        and set(run.invocations[1:]) == {"ok"}
        and len(run.kills) == 1
    )


def test_a_call_cut_inside_its_arguments_is_dropped_and_never_run(awaken: Harness) -> None:
    # The second call is cut: the complete first one is kept and the turn synthesised (R2).
    awaken.kill_at(KillPoint.inside_tool_call("open_ticket"))
    second_cut = awaken.run("Where is A-17?")
    assert (second_cut.status, second_cut.plans) == ("completed", ["R2"])
    assert resumed_once_killed(second_cut)
    assert [name for name, _ in second_cut.tool_calls] == ["lookup_order"]
    assert "open_ticket" not in {run.tool for run in awaken.tool_runs()}
    # The first call is cut: only the text survives, and the model goes on from it (R3).
    awaken.kill_at(KillPoint.inside_tool_call())
    first_cut = awaken.run("Where is A-17?")
    assert (first_cut.status, first_cut.plans) == ("completed", ["R3"])
    [kill] = first_cut.kills
    assert kill.partial_text == "Let me call lookup_order, open_ticket first. "
    assert [name for name, _ in first_cut.tool_calls] == ["lookup_order", "open_ticket"]
    runs = [r for r in awaken.tool_runs() if r.run_id == first_cut.run_id]
    assert sorted((r.tool, r.attempt) for r in runs) == [("lookup_order", 1), ("open_ticket", 1)]


def test_a_turn_whose_calls_were_all_saved_resumes_without_the_model(awaken: Harness) -> None:
    awaken.kill_at(KillPoint.tool_calls_done())
    run = awaken.run("Where is A-17? And open a ticket.")
    assert (run.status, run.plans) == ("completed", ["R2"]) and resumed_once_killed(run)
    assert sorted(r.tool for r in awaken.tool_runs()) == ["lookup_order", "open_ticket"]
    # The tools' environment (the awaken_env fixture) reached the async tool in the worker.
    assert run.tool_result("open_ticket").content == "ticket in billing: late order"
    assert run.tool_result("lookup_order").json() == {"order_id": "A-17", "status": "shipped"}


def test_a_call_claimed_but_not_started_before_a_crash_never_runs(awaken: Harness) -> None:
    awaken.kill_at(KillPoint.tool("open_ticket", when="before"))
    run = awaken.run("Open a ticket.")
    assert run.status == "completed" and run.invocations[0] == "killed"
    assert awaken.tool_runs("open_ticket") == []
    assert (run.tool_result("open_ticket").content, run.tool_result("open_ticket").is_error) == (
        OUTCOME_UNKNOWN,
        True,
    )
    # The next run passes the points of the last one: nothing is armed any more.
    again = awaken.run("Open a ticket.")
    assert again.invocations and set(again.invocations) == {"ok"} and not again.kills
    assert len(awaken.tool_runs("open_ticket")) == 1


def test_a_kill_point_the_run_never_reaches_fails_the_test(awaken: Harness) -> None:
    awaken.kill_at(KillPoint.text(100_000, turn=2))
    with pytest.raises(AssertionError, match="ended before its kill point: turn 2 at 100000"):
        awaken.run("Where is A-17?")
