"""The HTTP API handler, invoked in-process with HTTP API 2.0 events (JWT authorizer)
against DynamoDB, S3 and SQS on moto."""

from __future__ import annotations

import json
from typing import Any

import pytest

from handlers import api
from tests.handlers.conftest import MODEL, Aws, FakeContext, http_event

pytestmark = pytest.mark.slow


def call(method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    response = api.lambda_handler(http_event(method, path, **kwargs), FakeContext().lambda_context)
    body = json.loads(response["body"]) if response.get("body") else {}
    return int(response["statusCode"]), body


def new_thread(sub: str = "user-a", **body: Any) -> str:
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
    # A retried create of one's own thread answers with it; another caller gets a conflict.
    status, again = call("POST", "/threads", body={"thread_id": first["thread_id"]})
    assert (status, again["thread_id"]) == (200, first["thread_id"])
    status, taken = call("POST", "/threads", sub="user-b", body={"thread_id": first["thread_id"]})
    assert (status, taken["error"]) == (409, "thread_exists")


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
    assert json.loads(messages[0]["Body"]) == {"run_id": "run-1", "reason": "start"}
    assert messages[0]["Attributes"]["MessageGroupId"] == "run-1"
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
    assert body["details"][0]["loc"] == ["surprise"]

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


def test_message_content_is_not_logged(aws: Aws, caplog: pytest.LogCaptureFixture) -> None:
    thread_id = new_thread()
    secret = "my card number is 4111-1111"
    status, _ = call("POST", f"/threads/{thread_id}/runs", body={"message": secret, "run_id": "r9"})
    assert status == 202
    logged = [str(vars(record)) for record in caplog.records]
    assert any("r9" in entry for entry in logged)  # the ids are logged
    assert not any(secret in entry for entry in logged)
