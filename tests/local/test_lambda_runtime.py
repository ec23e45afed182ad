"""The container side: the Lambda context, handler loading and the reply to one invocation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from awaken_s3.local import lambda_host
from awaken_s3.local.invocations import EventSourceStats, InvocationResult
from awaken_s3.local.lambda_context import (
    InvocationHeaders,
    LocalLambdaContext,
    container_environment,
    function_arn,
    new_log_stream_name,
)
from awaken_s3.local.sqs_events import QueueRecord
from tests.fixtures.clock import FakeClock

ENV = container_environment(
    function_name="worker",
    handler="handlers.worker:lambda_handler",
    memory_mb=512,
    region="eu-west-1",
    log_stream_name="2026/01/31/[$LATEST]abc",
    task_root="/var/task",
)


def test_the_context_reads_the_container_environment_and_counts_down_to_the_deadline() -> None:
    clock = FakeClock(1000.0)
    headers = InvocationHeaders("req-1", function_arn("eu-west-1", "123", "worker"), 1_003_000)
    context = LocalLambdaContext.for_invocation(headers, ENV, clock=clock)
    assert (context.function_name, context.function_version) == ("worker", "$LATEST")
    assert context.memory_limit_in_mb == "512"  # a string, as in Lambda's own runtime
    assert context.log_group_name == "/aws/lambda/worker"
    assert context.log_stream_name == "2026/01/31/[$LATEST]abc"
    assert context.invoked_function_arn == "arn:aws:lambda:eu-west-1:123:function:worker"
    assert context.aws_request_id == "req-1"
    assert context.get_remaining_time_in_millis() == 3000
    clock.advance(2.5)
    assert context.get_remaining_time_in_millis() == 500
    clock.advance(7.5)
    assert context.get_remaining_time_in_millis() == 0
    assert InvocationHeaders.from_wire(json.loads(json.dumps(headers.to_wire()))) == headers


def test_reserved_variables_and_log_streams_have_lambda_s_shape() -> None:
    assert ENV["AWS_REGION"] == ENV["AWS_DEFAULT_REGION"] == "eu-west-1"
    assert ENV["_HANDLER"] == "handlers.worker:lambda_handler"
    stream = new_log_stream_name(datetime(2026, 1, 31, tzinfo=UTC))
    prefix, suffix = stream.split("]")
    assert prefix == "2026/01/31/[$LATEST"
    assert len(suffix) == 32 and int(suffix, 16) >= 0
    assert new_log_stream_name() != new_log_stream_name()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("handlers.worker:lambda_handler", ("handlers.worker", "lambda_handler")),
        ("handlers.worker.lambda_handler", ("handlers.worker", "lambda_handler")),
    ],
)
def test_handler_specs_take_both_spellings(spec: str, expected: tuple[str, str]) -> None:
    assert lambda_host.split_handler(spec) == expected


@pytest.mark.parametrize("spec", ["handler", ":f", "mod:"])
def test_a_malformed_handler_spec_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="is not 'module:function'"):
        lambda_host.split_handler(spec)


def test_a_missing_handler_is_an_init_error() -> None:
    with pytest.raises(AttributeError, match="no callable 'nope'"):
        lambda_host.load_handler("json:nope")
    loaded: object = lambda_host.load_handler("json:dumps")
    assert loaded is json.dumps


def request(event: Any) -> str:
    headers = InvocationHeaders("req-9", "arn:aws:lambda:eu-west-1:1:function:f", 2**41)
    return json.dumps({"headers": headers.to_wire(), "event": event})


def test_a_reply_carries_the_response_or_lambda_s_error_shape() -> None:
    def echo(event: Any, context: LocalLambdaContext) -> Any:
        return {"event": event, "request": context.aws_request_id}

    def boom(event: Any, context: LocalLambdaContext) -> Any:
        raise KeyError("missing")

    def unserialisable(event: Any, context: LocalLambdaContext) -> Any:
        return {1, 2}

    assert lambda_host._reply(echo, request({"a": 1})) == {
        "type": "result",
        "response": {"event": {"a": 1}, "request": "req-9"},
    }
    error = lambda_host._reply(boom, request({}))
    assert (error["type"], error["errorType"], error["errorMessage"]) == (
        "error",
        "KeyError",
        "'missing'",
    )
    assert any("boom" in line for line in error["stackTrace"])
    marshal = lambda_host._reply(unserialisable, request({}))
    assert marshal["errorType"] == "Runtime.MarshalError"


def test_stats_count_outcomes_cold_starts_and_records() -> None:
    record = QueueRecord("m1", "h", "b", None, 1, {})

    def result(outcome: Any, *, cold: bool, deleted: tuple[str, ...]) -> InvocationResult:
        return InvocationResult(
            request_id="r",
            records=(record,),
            outcome=outcome,
            response=None,
            error=None,
            deleted=deleted,
            retried=() if deleted else ("m1",),
            pid=1,
            log_stream_name="s",
            cold_start=cold,
            started_at=0.0,
            duration=0.0,
        )

    stats = EventSourceStats.of(
        [
            result("ok", cold=True, deleted=("m1",)),
            result("killed", cold=False, deleted=()),
            result("timeout", cold=True, deleted=()),
            result("ok", cold=False, deleted=("m1",)),
        ]
    )
    assert stats == EventSourceStats(
        invocations=4,
        ok=2,
        error=0,
        timeout=1,
        killed=1,
        cold_starts=2,
        records_deleted=2,
        records_retried=2,
    )
