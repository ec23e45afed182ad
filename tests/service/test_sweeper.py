"""The sweeper: the pure verdict per run, the sweep over every run-store backend, and the
scheduled handler re-sending a run whose start message was never sent, end to end on moto."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.models import StreamCheckpoint
from awaken_s3.service.queue import RunMessage
from awaken_s3.service.sweeper import ABANDONED, Abandon, Rescue, Skip, judge
from awaken_s3.service.wiring import Services
from awaken_s3.service.worker import make_handler
from awaken_s3.threads import (
    Lease,
    RunSettings,
    RunState,
    RunStatus,
)
from handlers import sweeper as sweeper_handler
from tests.fixtures import runs as fixtures
from tests.fixtures.runs import seed_run
from tests.service.conftest import Aws, FakeContext, emf_metrics, record_from_message, sqs_event

NOW = 1_000_000.0
GRACE = 120.0
SCHEDULED = json.loads((Path(__file__).parent / "events" / "scheduled_event.json").read_text())


def run_state(**changes: Any) -> RunState:
    """A queued run with its message, due for the sweeper."""
    return fixtures.run_state(**{"message_count": 1, "sweep_at": NOW - 1, **changes})


G = 120.0


@pytest.mark.parametrize(
    ("run", "verdict"),
    [
        (run_state(), Rescue(1, 0, G)),
        # Re-sent before with nobody picking it up since (a backlog, a lost message): counted
        # for the back-off only, never towards abandonment.
        (run_state(rescues=2, rescue_mark=1, rescue_epoch=0), Rescue(3, 0, 4 * G)),
        (run_state(rescues=9, rescue_mark=1, rescue_epoch=0), Rescue(10, 0, 32 * G)),
        # Re-sent, then a worker took it (a new epoch) and committed nothing: that counts...
        (
            run_state(rescues=2, fruitless_rescues=1, rescue_mark=1, rescue_epoch=0).with_(
                lease=Lease(None, 1, 0.0)
            ),
            Rescue(3, 2, 4 * G),
        ),
        # ... until the budget is spent: the run ends instead of looping.
        (
            run_state(rescues=5, fruitless_rescues=4, rescue_mark=1, rescue_epoch=0).with_(
                lease=Lease(None, 3, 0.0)
            ),
            "abandon",
        ),
        # Progress since the last rescue starts the count afresh.
        (run_state(rescues=5, fruitless_rescues=4, rescue_mark=0), Rescue(1, 0, G)),
        (run_state(status=RunStatus.SUSPENDED), Rescue(1, 0, G)),
        (run_state(status=RunStatus.RUNNING, lease=Lease("w", 3, NOW - 5)), Rescue(1, 0, G)),
        # Not the sweeper's: ended, not due (the index lags the table), or a live lease.
        (run_state(status=RunStatus.COMPLETED, sweep_at=None), Skip("ended")),
        (run_state(sweep_at=NOW + 1), Skip("not due")),
        (
            run_state(status=RunStatus.RUNNING, lease=Lease("w", 3, NOW + 5)),
            Skip("held by a live lease"),
        ),
    ],
)
def test_the_sweeper_s_verdict(run: RunState, verdict: object) -> None:
    got = judge(run, now=NOW, max_rescues=5, grace=G)
    if verdict == "abandon":
        assert isinstance(got, Abandon)
        assert (got.error.code, got.error.retryable) == (ABANDONED, False)
    else:
        assert got == verdict


@pytest.mark.slow
def test_a_run_whose_start_message_was_lost_is_rescued_and_completes(
    aws: Aws, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWAKEN_SWEEP_GRACE_SECONDS", "0.01")

    async def create(services: Services) -> None:
        # As the API does, but the send that follows never happens (the API crashed).
        await seed_run(services.threads, settings=RunSettings(model="m"))

    aws.run(create)
    assert aws.receive() == []
    summary = sweeper_handler.lambda_handler(SCHEDULED, FakeContext().lambda_context)
    assert (summary["rescued"], summary["abandoned"]) == (1, 0)
    assert emf_metrics(capsys.readouterr().out)["RunsRescued"] == 1

    [message] = aws.receive()
    assert RunMessage.model_validate_json(message["Body"]) == RunMessage(
        run_id="r1", reason="rescue"
    )
    from tests.service.test_worker import fast_model

    handler = make_handler(provider_factory=fast_model)
    response = handler(sqs_event(record_from_message(message, aws)), FakeContext().lambda_context)
    assert response == {"batchItemFailures": []}
    aws.delete(message)

    async def finished(services: Services) -> RunState:
        return await services.threads.get_run("r1")

    assert aws.run(finished).status == RunStatus.COMPLETED
    # Nothing left for the next sweep.
    summary = sweeper_handler.lambda_handler(SCHEDULED, FakeContext().lambda_context)
    assert summary["examined"] == 0


def test_a_checkpoint_that_outlived_its_run_is_deleted_by_the_next_sweep(
    aws: Aws, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A worker killed between the final commit and its delete, whose queue record then ran out
    # of receives: the run is completed, its checkpoint stays, and no message will ever come.
    monkeypatch.setenv("AWAKEN_SWEEP_GRACE_SECONDS", "0.01")

    async def leave_one_behind(services: Services) -> None:
        await seed_run(services.threads, "r1", thread_id="t1", settings=RunSettings(model="m"))
        await seed_run(services.threads, "r2", thread_id="t2", settings=RunSettings(model="m"))
        for run_id, thread_id in (("r1", "t1"), ("r2", "t2")):
            run = await services.threads.claim_run(run_id, worker="w", lease_seconds=60)
            partial = StreamCheckpoint(
                run_id=run_id,
                thread_id=thread_id,
                model="m",
                turn=0,
                partial_text="half a turn",
                epoch=run.lease.epoch,
                writer="w",
            )
            await services.checkpoints.put(partial, expected_version=None)
        await services.threads.finish_run("r1", worker="w", epoch=1, status=RunStatus.COMPLETED)

    aws.run(leave_one_behind)
    summary = sweeper_handler.lambda_handler(SCHEDULED, FakeContext().lambda_context)
    assert summary["leftovers_deleted"] == 1
    assert emf_metrics(capsys.readouterr().out)["LeftoverCheckpointsDeleted"] == 1

    async def left(services: Services) -> list[str]:
        return sorted([run_id async for run_id in services.checkpoints.list_run_ids()])

    # r2 is still running: its checkpoint is what its next worker resumes from.
    assert aws.run(left) == ["r2"]


@pytest.mark.slow
def test_one_invocation_makes_several_passes_and_stops_when_time_runs_short(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A schedule fires once a minute; the deployed sweeper looks every 15 s within it, so a
    # run whose message was lost between two passes is re-sent by the next one.
    from awaken_s3.service import sweeper_job

    monkeypatch.setenv("AWAKEN_SWEEP_GRACE_SECONDS", "0.01")
    monkeypatch.setenv("AWAKEN_SWEEP_PASSES", "3")
    monkeypatch.setenv("AWAKEN_SWEEP_PASS_EVERY_SECONDS", "15")
    waits: list[float] = []

    async def lose_a_start(services: Services, number: int) -> None:
        await seed_run(
            services.threads, f"r{number}", thread_id=f"t{number}", settings=RunSettings(model="m")
        )

    def between_passes(seconds: float) -> None:
        # Instead of sleeping: a run whose start message is lost meanwhile.
        waits.append(seconds)
        aws.run(lambda services: lose_a_start(services, len(waits) + 1))

    monkeypatch.setattr(sweeper_job, "sleep", between_passes)
    aws.run(lambda services: lose_a_start(services, 1))
    summary = sweeper_handler.lambda_handler(SCHEDULED, FakeContext().lambda_context)
    # Each pass re-sends what is due (with a grace this short, r1 again as well).
    assert summary["passes"] == 3 and summary["rescued"] >= 3
    # Passes keep to their schedule from the start (this sleep does not pass any time).
    assert len(waits) == 2 and 0 < waits[0] <= 15 < waits[1] <= 30
    assert {RunMessage.model_validate_json(m["Body"]).run_id for m in aws.receive()} == {
        "r1",
        "r2",
        "r3",
    }
    # With less time left than a pass needs after the wait, it stops after the first pass.
    waits.clear()
    short = FakeContext(remaining_ms=15_000).lambda_context
    assert sweeper_handler.lambda_handler(SCHEDULED, short)["passes"] == 1
    assert waits == []
