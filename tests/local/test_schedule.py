"""The local EventBridge schedule (awaken_s3.local.schedule): a scheduled event every tick in
one warm container, one invocation at a time, as the deployed sweeper is invoked."""

from __future__ import annotations

from pathlib import Path

import pytest

from awaken_s3.local.containers import FunctionConfig
from awaken_s3.local.schedule import ScheduledFunction
from tests.local.conftest import HandlerLog, eventually

pytestmark = pytest.mark.slow


async def test_ticks_invoke_one_warm_container_one_at_a_time(
    handler_log: HandlerLog, tmp_path: Path
) -> None:
    hold = tmp_path / "hold"
    hold.touch()  # the first invocation waits until the test lets it go
    function = FunctionConfig(
        "tests.local.handlers:scheduled_handler",
        timeout=30,
        env={"EMULATOR_LOG": str(handler_log.path), "EMULATOR_HOLD": str(hold)},
        name="sweeper",
    )
    async with ScheduledFunction(function, rate=0.2, first_at_once=True) as schedule:
        await eventually(lambda: schedule.throttled >= 2, what="ticks dropped while one runs")
        assert schedule.results() == []  # still the first invocation
        hold.unlink()
        await eventually(lambda: len(schedule.results()) >= 3, what="three invocations")
        extra = await schedule.invoke_now()
    replies = [*schedule.results()]
    assert extra in replies
    assert all(r.outcome == "ok" for r in replies)
    assert len({r.response["served"] for r in replies}) == len(replies)  # a request id each
    starts = handler_log.lines("scheduled")
    assert len({line["pid"] for line in starts}) == 1  # one container, kept warm
    for line in starts:
        event = line["event"]
        assert (event["detail-type"], event["source"], event["detail"]) == (
            "Scheduled Event",
            "aws.events",
            {},
        )
        assert event["resources"][0].startswith("arn:aws:events:us-east-1:")
        assert 0 < line["remaining_ms"] <= 30_000
