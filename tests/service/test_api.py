"""The HTTP API handler, invoked in-process with HTTP API 2.0 events (JWT authorizer)
against DynamoDB, S3 and SQS on moto."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.service.wiring import shared_session
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads.models import RunStatus
from handlers import api
from tests.service.conftest import MODEL, Aws, FakeContext, http_event, stored

pytestmark = pytest.mark.slow


def call(method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    response = api.lambda_handler(http_event(method, path, **kwargs), FakeContext().lambda_context)
    body = json.loads(response["body"]) if response.get("body") else {}
    return int(response["statusCode"]), body


def new_thread(sub: str = "user-a", **body: Any) -> str:
    """Create a thread as ``sub``; returns its (caller's) id."""
    status, created = call("POST", "/threads", sub=sub, body=body)
    assert status == 201, created
    return str(created["thread_id"])


def test_create_thread_then_read_it(aws: Aws) -> None:
    status, created = call(
        "POST", "/threads", body={"thread_id": "t-1", "metadata": {"topic": "s3"}}
    )
    assert status == 201
    assert created["thread_id"] == "t-1"
    assert created["metadata"] == {"topic": "s3"}
    status, thread = call("GET", "/threads/t-1")
    assert status == 200
    assert thread["messages"] == []
    assert thread["message_count"] == 0


def test_generated_thread_ids_and_retried_create(aws: Aws) -> None:
    status, first = call("POST", "/threads")
    assert status == 201 and first["thread_id"]
    # A retried create of one's own thread answers with it.
    status, again = call("POST", "/threads", body={"thread_id": first["thread_id"]})
    assert (status, again["thread_id"]) == (200, first["thread_id"])


def test_a_thread_id_another_caller_holds_is_free_for_anyone_else(aws: Aws) -> None:
    new_thread("user-a", thread_id="shared", metadata={"owner": "a"})
    # A create with the same id answers exactly as for an id nobody has used: 201, an empty
    # thread of this caller's own. Nothing tells user-b that user-a has a thread "shared".
    status, created = call(
        "POST", "/threads", sub="user-b", body={"thread_id": "shared", "metadata": {"owner": "b"}}
    )
    assert (status, created["thread_id"], created["metadata"]) == (201, "shared", {"owner": "b"})
    call("POST", "/threads/shared/runs", sub="user-b", body={"message": "b's", "run_id": "r"})
    status, run_a = call("POST", "/threads/shared/runs", body={"message": "a's", "run_id": "r"})
    assert (status, run_a["run_id"], run_a["message_count"]) == (202, "r", 1)
    texts = {
        sub: [
            m["content"][0]["text"] for m in call("GET", "/threads/shared", sub=sub)[1]["messages"]
        ]
        for sub in ("user-a", "user-b")
    }
    assert texts == {"user-a": ["a's"], "user-b": ["b's"]}
    assert stored("shared", "user-a") != stored("shared", "user-b")


def test_a_retried_thread_create_with_other_metadata_is_a_conflict(aws: Aws) -> None:
    new_thread(thread_id="t-meta", metadata={"topic": "s3"})
    status, conflict = call(
        "POST", "/threads", body={"thread_id": "t-meta", "metadata": {"topic": "sqs"}}
    )
    assert (status, conflict["error"]) == (409, "thread_exists")
    assert call("GET", "/threads/t-meta")[1]["metadata"] == {"topic": "s3"}
    status, same = call(
        "POST", "/threads", body={"thread_id": "t-meta", "metadata": {"topic": "s3"}}
    )
    assert status == 200 and same["metadata"] == {"topic": "s3"}


def test_create_run_enqueues_the_run_on_the_fifo_queue(aws: Aws) -> None:
    thread_id = new_thread()
    status, run = call(
        "POST", f"/threads/{thread_id}/runs", body={"message": "hello", "run_id": "run-1"}
    )
    assert status == 202
    assert run["run_id"] == "run-1"
    assert run["status"] == "queued"
    assert run["model"] == MODEL
    assert run["message_count"] == 1
    messages = aws.receive()
    assert len(messages) == 1
    # The queue carries the stored id: the worker needs no caller to find the run.
    assert json.loads(messages[0]["Body"]) == {"run_id": stored("run-1"), "reason": "start"}
    assert messages[0]["Attributes"]["MessageGroupId"] == stored("run-1")
    status, thread = call("GET", f"/threads/{thread_id}")
    assert [m["role"] for m in thread["messages"]] == ["user"]
    assert thread["messages"][0]["content"][0]["text"] == "hello"


def test_retried_create_run_is_idempotent(aws: Aws) -> None:
    thread_id = new_thread()
    body = {"message": "hello", "run_id": "run-1", "max_tokens": 100}
    first = call("POST", f"/threads/{thread_id}/runs", body=body)
    second = call("POST", f"/threads/{thread_id}/runs", body=body)
    assert first[0] == second[0] == 202
    assert first[1]["run_id"] == second[1]["run_id"] == "run-1"
    _, thread = call("GET", f"/threads/{thread_id}")
    assert thread["message_count"] == 1
    # Both sends carry one deduplication id: the FIFO queue holds one message.
    assert len(aws.receive()) == 1
    # The same run id with other settings is a conflict, not a silent second run.
    status, conflict = call("POST", f"/threads/{thread_id}/runs", body={**body, "max_tokens": 200})
    assert (status, conflict["error"]) == (409, "run_exists")


def test_a_second_run_on_a_thread_with_an_active_run_is_refused(aws: Aws) -> None:
    thread_id = new_thread()
    call("POST", f"/threads/{thread_id}/runs", body={"message": "one", "run_id": "run-1"})
    status, refused = call(
        "POST", f"/threads/{thread_id}/runs", body={"message": "two", "run_id": "run-2"}
    )
    # 409 naming the active run: the caller waits for it or cancels it.
    assert (status, refused["error"], refused["details"]) == (
        409,
        "run_active",
        [{"run_id": "run-1"}],
    )
    _, thread = call("GET", f"/threads/{thread_id}")
    assert [m["content"][0]["text"] for m in thread["messages"]] == ["one"]  # "two" not added
    call("POST", "/runs/run-1/cancel")
    status, second = call(
        "POST", f"/threads/{thread_id}/runs", body={"message": "two", "run_id": "run-2"}
    )
    assert (status, second["run_id"]) == (202, "run-2")


def test_a_retried_run_create_with_another_message_is_a_conflict(aws: Aws) -> None:
    thread_id = new_thread()
    body = {"message": "transfer 10 EUR to Bob", "run_id": "run-1"}
    assert call("POST", f"/threads/{thread_id}/runs", body=body)[0] == 202
    status, conflict = call(
        "POST", f"/threads/{thread_id}/runs", body={**body, "message": "transfer 10000 EUR"}
    )
    assert (status, conflict["error"]) == (409, "run_exists")
    _, thread = call("GET", f"/threads/{thread_id}")
    assert [m["content"][0]["text"] for m in thread["messages"]] == ["transfer 10 EUR to Bob"]
    assert len(aws.receive()) == 1


def test_run_state_and_cancel(aws: Aws) -> None:
    thread_id = new_thread()
    call("POST", f"/threads/{thread_id}/runs", body={"message": "hi", "run_id": "run-1"})
    status, run = call("GET", "/runs/run-1")
    assert status == 200
    assert run["status"] == "queued"
    assert run["usage"] == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    assert run["error"] is None
    assert "lease" not in run and "owner" not in run
    status, cancelled = call("POST", "/runs/run-1/cancel")
    assert (status, cancelled["status"]) == (200, "cancelled")
    assert call("GET", "/runs/run-1")[1]["status"] == "cancelled"


def test_another_caller_sees_404_exactly_like_a_missing_id(aws: Aws) -> None:
    thread_id = new_thread("user-a")
    call("POST", f"/threads/{thread_id}/runs", sub="user-a", body={"message": "x", "run_id": "r1"})
    foreign = [
        call("GET", f"/threads/{thread_id}", sub="user-b"),
        call("POST", f"/threads/{thread_id}/runs", sub="user-b", body={"message": "x"}),
        call("GET", "/runs/r1", sub="user-b"),
        call("POST", "/runs/r1/cancel", sub="user-b"),
    ]
    missing = [
        call("GET", "/threads/nope", sub="user-b"),
        call("POST", "/threads/nope/runs", sub="user-b", body={"message": "x"}),
        call("GET", "/runs/nope", sub="user-b"),
        call("POST", "/runs/nope/cancel", sub="user-b"),
    ]
    for (status, body), (missing_status, missing_body) in zip(foreign, missing, strict=True):
        assert status == missing_status == 404
        assert body["error"] == missing_body["error"] == "not_found"
    # The owner's run was not cancelled by the other caller.
    assert call("GET", "/runs/r1", sub="user-a")[1]["status"] == "queued"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/threads"),
        ("GET", "/threads/t-1"),
        ("POST", "/threads/t-1/runs"),
        ("GET", "/runs/r-1"),
        ("POST", "/runs/r-1/cancel"),
    ],
)
def test_requests_without_a_subject_are_401(aws: Aws, method: str, path: str) -> None:
    status, body = call(method, path, sub=None, body={"message": "x"})
    assert (status, body["error"]) == (401, "unauthorized")
    status, _ = call(method, path, claims={"iss": "x"}, body={"message": "x"})
    assert status == 401


def test_malformed_bodies(aws: Aws) -> None:
    thread_id = new_thread()
    runs = f"/threads/{thread_id}/runs"
    status, body = call("POST", runs, raw_body="{not json")
    assert (status, body["error"]) == (400, "invalid_json")
    status, body = call("POST", runs, raw_body="[1, 2]")
    assert (status, body["error"]) == (400, "invalid_json")

    status, body = call("POST", runs, body={"message": ""})
    assert (status, body["error"]) == (422, "invalid_request")
    assert body["details"][0]["loc"] == ["message"]

    status, body = call("POST", runs, body={"message": "x", "max_tokens": 10_000_000})
    assert status == 422
    assert [d["loc"] for d in body["details"]] == [["max_tokens"]]

    status, body = call("POST", runs, body={"message": "x", "surprise": 1})
    assert status == 422
    # An unknown key is the caller's own text: the error names the fields, not the key.
    [detail] = body["details"]
    assert (detail["loc"], detail["type"]) == ([], "extra_forbidden")
    assert "surprise" not in json.dumps(body) and "max_tokens" in detail["msg"]

    status, body = call("POST", runs, body={"message": "x", "model": "some-costly-model"})
    assert status == 422
    assert body["details"][0]["loc"] == ["model"]

    status, body = call("POST", runs, body={"message": "x", "run_id": "../escape"})
    assert status == 422
    assert body["details"][0]["loc"] == ["run_id"]
    # Field errors name the field and the rule, never echo the whole input back.
    assert set(body["details"][0]) == {"loc", "msg", "type"}

    status, body = call("POST", "/threads", body={"thread_id": "a/b"})
    assert status == 422
    # Nothing was created by the refused requests.
    assert call("GET", f"/threads/{thread_id}")[1]["message_count"] == 0
    assert aws.receive() == []


def test_allowed_models_come_from_the_environment(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWAKEN_ALLOWED_MODELS", "small-1, large-2")
    thread_id = new_thread()
    status, run = call(
        "POST", f"/threads/{thread_id}/runs", body={"message": "x", "model": "large-2"}
    )
    assert (status, run["model"]) == (202, "large-2")


def test_invalid_path_ids_are_400(aws: Aws) -> None:
    for method, path in [
        ("GET", "/threads/..%2Fx"),
        ("GET", "/runs/a.b"),
        ("POST", "/runs/a.b/cancel"),
    ]:
        status, body = call(method, path)
        assert (status, body["error"]) == (400, "invalid_id"), path


def test_oversize_bodies_are_413(aws: Aws) -> None:
    thread_id = new_thread()
    huge = {"message": "x" * (256 * 1024 + 1)}
    status, body = call("POST", f"/threads/{thread_id}/runs", body=huge)
    assert (status, body["error"]) == (413, "body_too_large")
    status, _ = call("POST", f"/threads/{thread_id}/runs", body=huge, base64_body=True)
    assert status == 413
    assert call("GET", f"/threads/{thread_id}")[1]["message_count"] == 0


def test_base64_bodies_are_decoded(aws: Aws) -> None:
    status, created = call("POST", "/threads", body={"thread_id": "t-b64"}, base64_body=True)
    assert (status, created["thread_id"]) == (201, "t-b64")


def test_unknown_routes_are_404(aws: Aws) -> None:
    for method, path in [("GET", "/nope"), ("DELETE", "/threads/t-1"), ("GET", "/runs")]:
        status, body = call(method, path)
        assert (status, body["error"]) == (404, "not_found"), (method, path)


def test_internal_errors_never_leak_a_stack_trace(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWAKEN_TABLE", "no-such-table")
    response = api.lambda_handler(http_event("GET", "/threads/t-1"), FakeContext().lambda_context)
    assert response["statusCode"] == 500
    assert json.loads(response["body"]) == {
        "error": "internal_error",
        "message": "internal error; retry later",
    }
    assert "Traceback" not in response["body"]


def test_a_store_that_keeps_throttling_is_a_503_the_caller_may_retry(aws: Aws) -> None:
    from tests.threads.faults import dynamo_error

    def throttle(**kwargs: Any) -> Any:
        url = kwargs["request"].url
        return dynamo_error(url, 400, "ProvisionedThroughputExceededException")

    hooks = shared_session()._session
    hooks.register("before-send.dynamodb.GetItem", throttle)
    try:
        status, body = call("GET", "/threads/t-1")
    finally:
        hooks.unregister("before-send.dynamodb.GetItem", throttle)
    assert (status, body) == (
        503,
        {"error": "unavailable", "message": "the service is busy; retry shortly"},
    )


def test_message_content_is_not_logged(aws: Aws, caplog: pytest.LogCaptureFixture) -> None:
    thread_id = new_thread()
    secret = "my card number is 4111-1111"
    status, _ = call("POST", f"/threads/{thread_id}/runs", body={"message": secret, "run_id": "r9"})
    assert status == 202
    logged = [str(vars(record)) for record in caplog.records]
    assert any("r9" in entry for entry in logged)  # the ids are logged
    assert not any(secret in entry for entry in logged)


def test_a_failed_run_shows_its_error_code_and_a_fixed_text_never_the_provider_s(
    aws: Aws,
) -> None:
    thread_id = new_thread()
    call("POST", f"/threads/{thread_id}/runs", body={"message": "hi", "run_id": "run-1"})
    raw = (
        "Error code: 401 - Incorrect API key provided: sk-proj-ab12****************wxyz; "
        "assumed role arn:aws:iam::123456789012:role/awaken-WorkerRole-1A2B3C"
    )

    async def fail(services: Any) -> None:
        run = await services.threads.claim_run(stored("run-1"), worker="w", lease_seconds=30)
        await services.threads.finish_run(
            stored("run-1"),
            worker="w",
            epoch=run.lease.epoch,
            status=RunStatus.FAILED,
            error=ClassifiedError("authentication_failed", raw, retryable=False),
        )

    aws.run(fail)
    status, run = call("GET", "/runs/run-1")
    assert (status, run["status"]) == (200, "failed")
    assert run["error"] == {
        "code": "authentication_failed",
        "message": "the service could not authenticate with the model provider",
    }
    for secret in ("sk-proj", "wxyz", "arn:aws:iam", "123456789012"):
        assert secret not in json.dumps(run)


def test_deeply_nested_json_is_a_400_not_a_crash(aws: Aws) -> None:
    thread_id = new_thread()
    for raw in ('{"message": ' + "[" * 100_000 + "]" * 100_000 + "}", "[" * 200_000):
        status, body = call("POST", f"/threads/{thread_id}/runs", raw_body=raw)
        assert (status, body["error"]) == (400, "invalid_json")
    status, body = call("POST", "/threads", raw_body='{"metadata": ' + '{"a": ' * 30_000 + "}")
    assert (status, body["error"]) == (400, "invalid_json")


def _invoke(event: Any) -> tuple[int, dict[str, Any]]:
    response = api.lambda_handler(event, FakeContext().lambda_context)
    return int(response["statusCode"]), json.loads(response["body"])


def test_events_that_are_not_http_api_requests_are_refused_not_a_500(aws: Aws) -> None:
    good = http_event("GET", "/threads/t-1")
    no_context = {k: v for k, v in good.items() if k != "requestContext"}
    assert _invoke(no_context) == (
        401,
        {"error": "unauthorized", "message": "authentication required"},
    )
    assert _invoke({**good, "requestContext": "nope"})[0] == 401
    broken_events: list[Any] = [
        [],
        "GET /threads",
        {**good, "requestContext": {**good["requestContext"], "http": None}},
        {k: v for k, v in good.items() if k != "rawPath"},
        {**good, "headers": ["authorization"]},
        {**good, "body": {"message": "x"}},
    ]
    for broken in broken_events:
        status, body = _invoke(broken)
        assert (status, body["error"]) == (400, "invalid_event"), broken
    # An authorizer block of the wrong shape is no caller, not a crash.
    odd = http_event("GET", "/threads/t-1")
    odd["requestContext"]["authorizer"] = {"jwt": "not-a-map"}
    assert _invoke(odd) == (401, {"error": "unauthorized", "message": "authentication required"})


def test_powertools_dev_mode_cannot_print_the_bearer_token() -> None:
    # POWERTOOLS_DEV makes an unpinned resolver print every event, headers included; the
    # handler is imported afresh with it set, as a function configured that way would be.
    event = http_event("GET", "/threads/a.b")
    event["headers"]["authorization"] = "Bearer eyJ-secret-token"
    script = (
        "import json, sys\n"
        "from handlers import api\n"
        "from tests.service.conftest import FakeContext\n"
        "event = json.loads(sys.stdin.read())\n"
        "response = api.lambda_handler(event, FakeContext().lambda_context)\n"
        "print('STATUS', response['statusCode'])\n"
    )
    env = {
        **os.environ,
        "POWERTOOLS_DEV": "true",
        "POWERTOOLS_LOGGER_LOG_EVENT": "true",
        "POWERTOOLS_LOG_LEVEL": "DEBUG",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
        timeout=60,
    )
    assert "STATUS 400" in done.stdout
    assert "eyJ-secret-token" not in done.stdout + done.stderr
    assert api.app._debug is False
