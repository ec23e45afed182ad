"""A project's tools read their settings from the environment: the template's ToolEnvironment
(one JSON object, ``AWAKEN_TOOL_ENVIRONMENT``) is set in the worker's environment when its
handler is built, and a bad one fails the handler's build, naming what is wrong."""

from __future__ import annotations

import json
import os

import pytest

from awaken_s3 import Agent, App, tool
from awaken_s3.service.tool_environment import VARIABLE, parse_tool_environment
from awaken_s3.settings import SettingsError
from awaken_s3.streaming.scripted import ScriptedProvider, finish, text_turn, tool_call
from tests.service.conftest import Aws, api_call
from tests.service.test_worker import deliver


def test_the_variables_are_a_json_object_of_strings() -> None:
    assert parse_tool_environment("") == {}
    assert parse_tool_environment('{"TICKETS_URL": "https://t", "tier": "2"}') == {
        "TICKETS_URL": "https://t",
        "tier": "2",
    }
    for text, problem in (
        ("not json", "is not JSON"),
        ('["A"]', "must be a JSON object"),
        ('{"A": 1}', "value of A must be a string"),
        ('{"1A": "x"}', "is not an environment variable name"),
        ('{"AWS_REGION": "eu-west-1"}', "AWS_REGION is reserved"),
        ('{"awaken_bucket": "b"}', "awaken_bucket is reserved"),
        ('{"POWERTOOLS_LOG_LEVEL": "DEBUG"}', "reserved"),
    ):
        with pytest.raises(SettingsError, match=problem):
            parse_tool_environment(text)


def test_a_tool_reads_the_deployment_s_variables_when_it_runs(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    @tool
    def open_ticket(summary: str) -> str:
        """Open a ticket."""
        seen.append(os.environ["TICKETS_URL"])
        return f"opened at {os.environ['TICKETS_URL']}"

    # The handler sets the variable in os.environ itself: monkeypatch restores it (to absent)
    # only for a name it has set before.
    monkeypatch.setenv("TICKETS_URL", "")
    monkeypatch.delenv("TICKETS_URL")
    monkeypatch.setenv(VARIABLE, json.dumps({"TICKETS_URL": "https://tickets.example"}))
    app = App([Agent("desk", tools=[open_ticket])])
    model = ScriptedProvider(
        [
            [*tool_call(0, "open_ticket", {"summary": "late"}, call_id="c1"), *finish("tool_use")],
            text_turn("Opened."),
        ]
    )
    handler = app.worker_handler(provider_factory=lambda: model)
    api = app.api_handler()
    thread = api_call(api, "POST", "/threads")["thread_id"]
    body = {"message": "my order is late", "run_id": "r1"}
    api_call(api, "POST", f"/threads/{thread}/runs", body=body)
    response, _ = deliver(aws, handler)
    assert response == {"batchItemFailures": []}
    assert seen == ["https://tickets.example"]
    assert api_call(api, "GET", "/runs/r1")["status"] == "completed"


def test_a_variable_the_function_already_sets_otherwise_fails_the_handler_s_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TICKETS_URL", "https://from-the-function")
    monkeypatch.setenv(VARIABLE, json.dumps({"TICKETS_URL": "https://from-the-tools"}))
    app = App([Agent("desk")])
    with pytest.raises(SettingsError, match="TICKETS_URL is already set"):
        app.worker_handler()
    monkeypatch.setenv(VARIABLE, "{oops")
    with pytest.raises(SettingsError, match="is not JSON"):
        app.worker_handler()
