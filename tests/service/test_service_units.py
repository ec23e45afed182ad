"""The handlers' pure parts: queue message schema and send parameters, record dispositions,
settings, deadline and worker ids. No AWS."""

from __future__ import annotations

import io
import json
import logging
import re
import time

import pytest
from aws_lambda_powertools import Logger
from pydantic import ValidationError

from awaken_s3.runtime.loop import RunEnd, RunResult
from awaken_s3.service.config import WorkerSettings, allowed_models
from awaken_s3.service.dispositions import (
    MAX_DELAY,
    RETRY_SOON,
    RUN_END_METRICS,
    Action,
    disposition,
)
from awaken_s3.service.logs import route_library_logs
from awaken_s3.service.queue import (
    RunMessage,
    deduplication_id,
    is_fifo,
    send_message_args,
)
from awaken_s3.service.worker import deadline_for, is_fifo_event, worker_id
from awaken_s3.settings import SettingsError
from awaken_s3.threads import Lease, RunState, RunStatus
from tests.fixtures.runs import run_state
from tests.service.conftest import FakeContext, sqs_record

FIFO = "https://sqs.us-east-1.amazonaws.com/123456789012/awaken-runs.fifo"
STANDARD = "https://sqs.us-east-1.amazonaws.com/123456789012/awaken-runs"
#: what SQS accepts in a MessageDeduplicationId
DEDUP_ALPHABET = re.compile(r"^[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}$")


def test_fifo_is_detected_by_the_url_suffix() -> None:
    assert is_fifo(FIFO)
    assert is_fifo(FIFO + "/")
    assert not is_fifo(STANDARD)


def test_fifo_sends_carry_group_and_deduplication_ids() -> None:
    args = send_message_args(FIFO, RunMessage(run_id="run-1"), epoch=0, turn=0)
    assert args["MessageGroupId"] == "run-1"
    assert DEDUP_ALPHABET.match(args["MessageDeduplicationId"])
    assert args["MessageBody"] == '{"run_id":"run-1","reason":"start"}'


def test_standard_sends_carry_neither() -> None:
    args = send_message_args(STANDARD, RunMessage(run_id="run-1", reason="continue"), epoch=3)
    assert set(args) == {"QueueUrl", "MessageBody"}


def test_deduplication_ids_are_unique_per_intended_delivery() -> None:
    ids = {
        deduplication_id(run, reason, epoch=epoch, turn=turn)
        for run in ("run-1", "run-2")
        for reason in ("start", "continue")
        for epoch in range(3)
        for turn in range(3)
    }
    assert len(ids) == 2 * 2 * 3 * 3
    # The same intent (a retried send) keeps its id, so FIFO collapses the retry.
    assert deduplication_id("run-1", "continue", epoch=2, turn=1) == deduplication_id(
        "run-1", "continue", epoch=2, turn=1
    )


def test_deduplication_ids_fit_sqs_limits_for_the_longest_run_id() -> None:
    longest = "r" * 128
    value = deduplication_id(longest, "continue", epoch=10**12, turn=10**6)
    assert DEDUP_ALPHABET.match(value)


def test_run_messages_validate_the_run_id_and_ignore_unknown_fields() -> None:
    message = RunMessage.model_validate_json('{"run_id": "r-1", "sent_by": "v2"}')
    assert (message.run_id, message.reason) == ("r-1", "start")
    for body in ('{"run_id": "../x"}', "{}", '{"run_id": 5}', '{"run_id": "r", "reason": "z"}'):
        with pytest.raises(ValidationError):
            RunMessage.model_validate_json(body)


NOW = 1_000_000.0
LEASE = 60.0


def state(status: RunStatus, owner: str | None = None, until: float = 0.0) -> RunState:
    return run_state(status=status, lease=Lease(owner, 4, until))


def decide(end: RunEnd, run: RunState | None, *, left: bool = False) -> tuple[Action, int]:
    result = RunResult("r1", end, run, checkpoint_left=left)
    got = disposition(result, now=NOW, lease_seconds=LEASE)
    return got.action, got.delay


RUNNING = RunStatus.RUNNING


@pytest.mark.parametrize(
    ("end", "run", "left", "expected"),
    [
        # Ended runs: acknowledged, also when a checkpoint could not be deleted (S3 down): the
        # leftover is stale and the sweeper's; keeping the record would feed the DLQ.
        (RunEnd.COMPLETED, state(RunStatus.COMPLETED), False, (Action.ACK, 0)),
        (RunEnd.COMPLETED, state(RunStatus.COMPLETED), True, (Action.ACK, 0)),
        (RunEnd.FAILED, state(RunStatus.FAILED), True, (Action.ACK, 0)),
        (RunEnd.FAILED, state(RunStatus.FAILED), False, (Action.ACK, 0)),
        (RunEnd.CANCELLED, state(RunStatus.CANCELLED), False, (Action.ACK, 0)),
        (RunEnd.NOT_RUNNABLE, state(RunStatus.COMPLETED), False, (Action.ACK, 0)),
        (RunEnd.NOT_RUNNABLE, state(RunStatus.COMPLETED), True, (Action.ACK, 0)),
        # Handed over: a continuation drives it.
        (RunEnd.SUSPENDED, state(RunStatus.SUSPENDED), False, (Action.CONTINUE, 0)),
        # Someone else's lease: a live holder (it renews every third of a lease) keeps its own
        # record and drives the run...
        (RunEnd.BUSY, state(RUNNING, "w2", NOW + 50), False, (Action.ACK, 0)),
        (RunEnd.FENCED, state(RUNNING, "w2", NOW + LEASE / 3), False, (Action.ACK, 0)),
        # ... one that stopped renewing may be dead: come back when its lease runs out.
        (RunEnd.BUSY, state(RUNNING, "w2", NOW + 12.2), False, (Action.RETRY, 14)),
        (RunEnd.FENCED, state(RUNNING, "w2", NOW - 3), False, (Action.RETRY, RETRY_SOON)),
        # Released by the newer epoch (it sent the continuation), or ended meanwhile.
        (RunEnd.FENCED, state(RunStatus.SUSPENDED), False, (Action.ACK, 0)),
        (RunEnd.FENCED, state(RunStatus.COMPLETED), False, (Action.ACK, 0)),
        # Nothing shows who drives it: keep the record, the next claim decides.
        (RunEnd.FENCED, None, False, (Action.RETRY, RETRY_SOON)),
    ],
)
def test_a_record_is_kept_unless_the_run_ended_is_handed_over_or_has_a_live_holder(
    end: RunEnd, run: RunState | None, left: bool, expected: tuple[Action, int]
) -> None:
    assert decide(end, run, left=left) == expected


def test_a_kept_record_never_waits_past_the_cap() -> None:
    # A very long lease that stopped renewing: its holder may be dead, but the record comes
    # back within the cap, and the claim then decides.
    stalled = state(RUNNING, "w2", NOW + 2 * MAX_DELAY)
    result = RunResult("r1", RunEnd.BUSY, stalled)
    kept = disposition(result, now=NOW, lease_seconds=10 * MAX_DELAY)
    assert (kept.action, kept.delay) == (Action.RETRY, MAX_DELAY)


def test_every_run_end_has_a_metric() -> None:
    assert set(RUN_END_METRICS) == set(RunEnd)


def test_worker_settings_from_the_environment() -> None:
    assert WorkerSettings.from_env({}) == WorkerSettings(deadline_margin=10.0, lease_seconds=60.0)
    settings = WorkerSettings.from_env(
        {"AWAKEN_DEADLINE_MARGIN_SECONDS": "2.5", "AWAKEN_LEASE_SECONDS": "90"}
    )
    assert (settings.deadline_margin, settings.lease_seconds) == (2.5, 90.0)
    for bad in ("soon", "0", "-1"):
        with pytest.raises(SettingsError):
            WorkerSettings.from_env({"AWAKEN_DEADLINE_MARGIN_SECONDS": bad})


def test_allowed_models_always_include_the_default() -> None:
    assert allowed_models({}, default="m1") == {"m1"}
    assert allowed_models({"AWAKEN_ALLOWED_MODELS": " m2 ,, m3"}, default="m1") == {
        "m1",
        "m2",
        "m3",
    }


def test_the_deadline_leaves_the_margin_before_lambda_stops() -> None:
    before = time.monotonic()
    deadline = deadline_for(FakeContext(remaining_ms=30_000).lambda_context, margin=10.0)
    after = time.monotonic()
    assert before + 20.0 <= deadline <= after + 20.0


def test_worker_ids_never_repeat_within_one_request() -> None:
    context = FakeContext().lambda_context
    ids = {worker_id(context) for _ in range(100)}
    assert len(ids) == 100
    assert all(context.aws_request_id in value for value in ids)


def test_fifo_events_are_recognised_by_their_source_arn() -> None:
    fifo = {"Records": [sqs_record("{}", group_id="g")]}
    standard = {"Records": [sqs_record("{}", queue_arn="arn:aws:sqs:us-east-1:1:runs")]}
    assert is_fifo_event(fifo, STANDARD)
    assert not is_fifo_event(standard, FIFO)
    assert is_fifo_event({"Records": []}, FIFO)


def test_library_logs_take_the_handler_format_only_inside_lambda() -> None:
    library = logging.getLogger("awaken_s3")
    saved = (list(library.handlers), library.propagate, library.level)
    buffer = io.StringIO()
    powertools = Logger(service="awaken-unit", logger_handler=logging.StreamHandler(buffer))
    try:
        assert not route_library_logs(powertools, env={})
        assert library.propagate  # outside Lambda the library's records reach root as usual
        assert route_library_logs(powertools, env={"AWS_LAMBDA_FUNCTION_NAME": "awaken-worker"})
        logging.getLogger("awaken_s3.runtime").warning("run %s: fenced", "run-7")
        line = json.loads(buffer.getvalue().splitlines()[-1])
        assert (line["message"], line["service"]) == ("run run-7: fenced", "awaken-unit")
    finally:
        library.handlers, library.propagate = saved[0], saved[1]
        library.setLevel(saved[2])
