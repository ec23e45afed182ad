"""The alarms and the dashboard template.yaml gives an operator, and that they watch the very
metrics the functions emit: Powertools EMF namespace and dimensions as configured by the
template's own environment, and the worker's refused-tool log line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.runtime.tools import REFUSED_LOG
from tests.infra.cfn import resources_of_type

Deployed = Callable[..., dict[str, Any]]
REPO = Path(__file__).resolve().parents[2]
TOPIC = "arn:aws:sns:us-east-1:123456789012:ops"


@pytest.fixture(scope="module")
def emitted(template: dict[str, Any]) -> dict[str, Any]:
    """One EMF document as the deployed worker prints it: the handler module imported fresh
    with the environment the template gives the function."""
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    script = (
        "from aws_lambda_powertools.metrics import MetricUnit\n"
        "from handlers import worker\n"
        "worker.metrics.add_metric(name='CheckpointFailures', unit=MetricUnit.Count, value=1)\n"
        "worker.metrics.flush_metrics()\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("POWERTOOLS_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={
            **clean,
            "POWERTOOLS_SERVICE_NAME": env["POWERTOOLS_SERVICE_NAME"],
            "POWERTOOLS_METRICS_NAMESPACE": env["POWERTOOLS_METRICS_NAMESPACE"],
        },
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    (line,) = [x for x in done.stdout.splitlines() if '"_aws"' in x]
    document: dict[str, Any] = json.loads(line)
    return document


def _emf_target(emitted: dict[str, Any]) -> tuple[str, dict[str, str]]:
    (directive,) = emitted["_aws"]["CloudWatchMetrics"]
    (dimension_set,) = directive["Dimensions"]
    return directive["Namespace"], {name: emitted[name] for name in dimension_set}


def test_the_worker_s_metrics_carry_the_service_dimension(emitted: dict[str, Any]) -> None:
    # What every custom-metric alarm below must name, or it watches a metric nobody emits.
    assert _emf_target(emitted) == ("AwakenS3", {"service": "awaken-s3"})


ALARMS = {
    # alarm: (namespace, metric, statistic)
    "DeadLetterAlarm": ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum"),
    "WorkerErrorsAlarm": ("AWS/Lambda", "Errors", "Sum"),
    "Api5xxAlarm": ("AWS/ApiGateway", "5xx", "Sum"),
    "OldestMessageAlarm": ("AWS/SQS", "ApproximateAgeOfOldestMessage", "Maximum"),
    "CheckpointFailuresAlarm": ("AwakenS3", "CheckpointFailures", "Sum"),
    "RunsRescuedAlarm": ("AwakenS3", "RunsRescued", "Sum"),
    "RescuedRepeatedlyAlarm": ("AwakenS3", "RunsRescuedRepeatedly", "Sum"),
    "AbandonedRunsAlarm": ("AwakenS3", "RunsAbandoned", "Sum"),
}


def test_every_alarm_a_production_user_expects_exists_and_notifies_the_topic(
    deployed: Deployed,
) -> None:
    for parameters, actions in (({}, None), ({"AlarmTopicArn": TOPIC}, [TOPIC])):
        alarms = resources_of_type(deployed(**parameters), "AWS::CloudWatch::Alarm")
        assert set(alarms) == set(ALARMS)
        for name, (namespace, metric, statistic) in ALARMS.items():
            props = alarms[name]["Properties"]
            assert (props["Namespace"], props["MetricName"], props["Statistic"]) == (
                namespace,
                metric,
                statistic,
            ), name
            assert props.get("AlarmActions") == actions, name
            # No data (nothing failed, no sweeper yet) is not an alarm.
            assert props["TreatMissingData"] == "notBreaching", name


def test_alarms_watch_the_right_resources(deployed: Deployed) -> None:
    resources = deployed(OldestMessageAlarmSeconds="900")

    def dimensions(name: str) -> dict[str, str]:
        return {d["Name"]: d["Value"] for d in resources[name]["Properties"]["Dimensions"]}

    assert dimensions("WorkerErrorsAlarm") == {"FunctionName": "<WorkerFunction>"}
    assert dimensions("Api5xxAlarm") == {"ApiId": "<HttpApi>"}
    assert dimensions("OldestMessageAlarm") == {"QueueName": "<RunQueue.QueueName>"}
    assert resources["OldestMessageAlarm"]["Properties"]["Threshold"] == "900"
    assert dimensions("DeadLetterAlarm") == {"QueueName": "<RunDeadLetterQueue.QueueName>"}


def test_custom_metric_alarms_name_what_the_functions_emit(
    deployed: Deployed, emitted: dict[str, Any]
) -> None:
    namespace, dims = _emf_target(emitted)
    resources = deployed()
    for name in ("CheckpointFailuresAlarm", "RunsRescuedAlarm"):
        props = resources[name]["Properties"]
        assert props["Namespace"] == namespace
        assert {d["Name"]: d["Value"] for d in props["Dimensions"]} == dims


def test_refused_tool_calls_are_counted_from_the_worker_s_log_line(
    deployed: Deployed, emitted: dict[str, Any]
) -> None:
    (flt,) = resources_of_type(deployed(), "AWS::Logs::MetricFilter").values()
    props = flt["Properties"]
    assert props["LogGroupName"] == "<WorkerLogGroup>"
    # A quoted term pattern matches the phrase in the JSON and in the plain log format alike.
    assert props["FilterPattern"] == f'"{REFUSED_LOG}"'
    (transformation,) = props["MetricTransformations"]
    assert transformation["MetricNamespace"] == _emf_target(emitted)[0]
    assert (transformation["MetricName"], transformation["MetricValue"]) == (
        "ToolCallsRefused",
        "1",
    )


def _dashboard_metrics(deployed: Deployed) -> list[list[Any]]:
    (dashboard,) = resources_of_type(deployed(), "AWS::CloudWatch::Dashboard").values()
    body = json.loads(dashboard["Properties"]["DashboardBody"])
    rows: list[list[Any]] = []
    for widget in body["widgets"]:
        assert widget["properties"]["region"] == "us-east-1"
        rows.extend(widget["properties"]["metrics"])
    return rows


def test_the_dashboard_shows_the_run_lifecycle_at_a_glance(deployed: Deployed) -> None:
    shown = {(row[0], row[1]) for row in _dashboard_metrics(deployed)}
    wanted = {
        ("AwakenS3", name)
        for name in (
            "RunsCompleted",
            "RunsFailed",
            "RecoveryPlanR1",
            "RecoveryPlanR2",
            "RecoveryPlanR3",
            "RecoveryPlanR4",
            "CheckpointPuts",
            "CheckpointFailures",
            "CheckpointFenced",
            "ResumeDelay",
            "RunsRescued",
            "LeftoverCheckpointsDeleted",
            "ToolCallsRefused",
        )
    }
    wanted |= {("AWS/SQS", "ApproximateAgeOfOldestMessage"), ("AWS/ApiGateway", "5xx")}
    assert wanted <= shown, wanted - shown


def test_dashboard_rows_name_what_is_emitted(deployed: Deployed, emitted: dict[str, Any]) -> None:
    namespace, dims = _emf_target(emitted)
    for row in _dashboard_metrics(deployed):
        if row[0] != namespace or row[1] == "ToolCallsRefused":  # a log metric: no dimensions
            continue
        pairs = [x for x in row[2:] if not isinstance(x, dict)]
        assert dict(zip(pairs[::2], pairs[1::2], strict=True)) == dims, row
