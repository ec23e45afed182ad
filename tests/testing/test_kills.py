"""Kill points: a point is reached once (the resumed worker passes it), and the harness kills
only once the checkpoint holds what the stream had sent at the point."""

from __future__ import annotations

from pathlib import Path

import pytest

from awaken_s3.models import PartialToolCall, StreamCheckpoint
from awaken_s3.testing.kills import (
    KillPoint,
    StreamState,
    checkpoint_ready,
    claim_marker,
    reached,
    read_plan,
    write_plan,
)


def checkpoint(text: str, *calls: tuple[str, bool]) -> StreamCheckpoint:
    return StreamCheckpoint(
        run_id="r1",
        thread_id="t1",
        model="m",
        turn=1,
        partial_text=text,
        tool_calls=tuple(
            PartialToolCall(index=i, id=f"c{i}", name=name, arguments="{", closed=closed)
            for i, (name, closed) in enumerate(calls, start=1)
        ),
    )


def test_the_harness_kills_only_once_the_checkpoint_holds_the_stream_at_the_point() -> None:
    at_text = StreamState(text=12)
    assert not checkpoint_ready(at_text, None)
    assert not checkpoint_ready(at_text, checkpoint("Let me"))
    assert checkpoint_ready(at_text, checkpoint("Let me call "))
    # Halfway through the second call: the first one closed, the second begun.
    inside = StreamState(text=12, calls=2, closed=1)
    assert not checkpoint_ready(inside, checkpoint("Let me call ", ("a", True)))
    assert checkpoint_ready(inside, checkpoint("Let me call ", ("a", True), ("b", False)))
    # Every call complete: an intermediate checkpoint with the first call only is not enough.
    done = StreamState(text=12, calls=2, closed=2)
    assert not checkpoint_ready(done, checkpoint("Let me call ", ("a", True)))
    assert not checkpoint_ready(done, checkpoint("Let me call ", ("a", True), ("b", False)))
    assert checkpoint_ready(done, checkpoint("Let me call ", ("a", True), ("b", True)))
    # A tool point: the turn is committed before its tools run, nothing to wait for.
    assert checkpoint_ready(None, None)


def test_a_point_is_reached_once_and_remembers_the_stream_s_state(tmp_path: Path) -> None:
    assert reached(tmp_path, 0) == (False, None)
    assert claim_marker(tmp_path, 0, StreamState(text=40))
    assert not claim_marker(tmp_path, 0, StreamState(text=99))  # the resumed worker passes
    assert reached(tmp_path, 0) == (True, StreamState(text=40))
    assert claim_marker(tmp_path, 1)
    assert reached(tmp_path, 1) == (True, None)


def test_the_plan_round_trips_and_bad_points_are_refused(tmp_path: Path) -> None:
    points = [
        KillPoint.text(40, turn=2),
        KillPoint.inside_tool_call(),
        KillPoint.tool_calls_done(),
        KillPoint.tool("open_ticket", when="before"),
    ]
    write_plan(tmp_path, points)
    assert read_plan(tmp_path) == points
    assert read_plan(tmp_path / "missing") == []
    for make in (
        lambda: KillPoint.text(0),
        lambda: KillPoint.text(3, turn=0),
        lambda: KillPoint("tool"),
        lambda: KillPoint.tool("x", when="during"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError):
            make()
