"""The live partial view through the HTTP API handler: GET /runs/{id} carries the partial turn
read from the checkpoint, GET /runs/{id}/partial polls it with If-None-Match and ``after``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from awaken_s3.models import PartialToolCall, StreamCheckpoint
from awaken_s3.service.wiring import Services
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import RunStatus
from handlers import api
from tests.service.conftest import MODEL, Aws, FakeContext, http_event, stored

pytestmark = pytest.mark.slow


def call(method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, str], dict[str, Any]]:
    response = api.lambda_handler(http_event(method, path, **kwargs), FakeContext().lambda_context)
    body = json.loads(response["body"]) if response.get("body") else {}
    headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
    return int(response["statusCode"]), headers, body


def start_run(run_id: str = "r1", thread_id: str = "t1", sub: str = "user-a") -> None:
    status, _, _ = call("POST", "/threads", sub=sub, body={"thread_id": thread_id})
    assert status == 201
    status, _, body = call(
        "POST", f"/threads/{thread_id}/runs", sub=sub, body={"message": "hi", "run_id": run_id}
    )
    assert status == 202, body


def checkpoint(
    text: str, *, turn: int = 0, run_id: str = "r1", thread_id: str = "t1"
) -> StreamCheckpoint:
    return StreamCheckpoint(
        run_id=stored(run_id),
        thread_id=stored(thread_id),
        model=MODEL,
        turn=turn,
        partial_text=text,
        tool_calls=(PartialToolCall(index=0, id="c1", name="search", arguments='{"q":'),),
        epoch=1,
        writer="w1",
        resumed_with="R1",
    )


def put(aws: Aws, cp: StreamCheckpoint, version: str | None = None) -> str:
    async def write(services: Services) -> str:
        return await services.checkpoints.put(cp, expected_version=version)

    return aws.run(write)


def test_a_run_without_a_checkpoint_has_no_partial(aws: Aws) -> None:
    start_run()
    status, _, run = call("GET", "/runs/r1")
    assert (status, run["status"], run["partial"]) == (200, "queued", None)
    assert "partial_unavailable" not in run


def test_get_run_shows_the_partial_turn_from_the_checkpoint(aws: Aws) -> None:
    start_run()
    version = put(aws, checkpoint("A stream checkpoint is"))
    status, _, run = call("GET", "/runs/r1")
    assert status == 200
    partial = run["partial"]
    assert partial["text"] == "A stream checkpoint is"
    assert partial["text_length"] == len("A stream checkpoint is")
    assert (partial["turn"], partial["resumed_with"]) == (0, "R1")
    assert partial["version"] == version.strip('"')
    assert partial["tool_calls"] == [
        {"index": 0, "id": "c1", "name": "search", "arguments": '{"q":', "complete": False}
    ]
    # The lease holder's identity stays internal, as in the rest of the run view.
    assert "writer" not in partial and "epoch" not in partial


def test_polling_costs_one_conditional_get_and_after_returns_only_new_text(aws: Aws) -> None:
    start_run()
    version = put(aws, checkpoint("Hello"))
    status, headers, first = call("GET", "/runs/r1/partial")
    assert status == 200 and first["partial"]["text"] == "Hello"
    etag = headers["etag"]
    assert headers["cache-control"] == "no-cache"

    status, again, body = call("GET", "/runs/r1/partial", headers={"If-None-Match": etag})
    assert (status, body, again["etag"]) == (304, {}, etag)

    put(aws, checkpoint("Hello, world"), version)
    query = {"after": str(first["partial"]["text_length"]), "turn": "0"}
    status, headers, newer = call(
        "GET", "/runs/r1/partial", query=query, headers={"If-None-Match": etag}
    )
    assert status == 200 and headers["etag"] != etag
    assert (newer["partial"]["offset"], newer["partial"]["text"]) == (5, ", world")
    assert newer["status"] == "queued" and newer["run_id"] == "r1"


def test_a_leftover_checkpoint_of_an_earlier_turn_is_not_a_partial(aws: Aws) -> None:
    start_run()
    put(aws, checkpoint("old turn", turn=3))
    assert call("GET", "/runs/r1")[2]["partial"] is None
    assert call("GET", "/runs/r1/partial")[2]["partial"] is None


def test_a_corrupt_checkpoint_shows_no_partial(aws: Aws) -> None:
    import boto3

    start_run()
    boto3.client("s3").put_object(
        Bucket=aws.bucket, Key=f"checkpoints/{stored('r1')}.json", Body=b"not json"
    )
    status, _, run = call("GET", "/runs/r1")
    assert (status, run["partial"]) == (200, None)


def test_another_callers_run_partial_is_not_found(aws: Aws) -> None:
    start_run()
    put(aws, checkpoint("secret"))
    status, _, body = call("GET", "/runs/r1/partial", sub="user-b")
    assert (status, body["error"]) == (404, "not_found")
    assert "secret" not in json.dumps(body)


@pytest.mark.parametrize("query", [{"after": "-1"}, {"after": "x"}, {"turn": "1.5"}])
def test_bad_offsets_are_400(aws: Aws, query: dict[str, str]) -> None:
    start_run()
    status, _, body = call("GET", "/runs/r1/partial", query=query)
    assert (status, body["error"]) == (400, "invalid_query")


def test_an_unreadable_checkpoint_store_is_said_not_guessed(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    start_run()
    # The run lives in DynamoDB; S3 now answers nothing but errors.
    monkeypatch.setenv("AWAKEN_BUCKET", "no-such-bucket-here")
    status, _, run = call("GET", "/runs/r1")
    assert (status, run["partial"], run["partial_unavailable"]) == (200, None, True)
    status, _, body = call("GET", "/runs/r1/partial")
    assert (status, body["error"]) == (503, "partial_unavailable")


def test_the_polled_view_says_why_a_run_failed_with_its_public_error(aws: Aws) -> None:
    start_run()
    assert call("GET", "/runs/r1/partial")[2]["error"] is None
    raw = "cannot connect to https://gw.example/v1/chat/completions: connection refused"

    async def fail(services: Services) -> None:
        run = await services.threads.claim_run(stored("r1"), worker="w", lease_seconds=30)
        await services.threads.finish_run(
            stored("r1"),
            worker="w",
            epoch=run.lease.epoch,
            status=RunStatus.FAILED,
            error=ClassifiedError("provider_unreachable", raw, retryable=False),
        )

    aws.run(fail)
    status, _, view = call("GET", "/runs/r1/partial")
    assert (status, view["status"], view["turn"], view["partial"]) == (200, "failed", 0, None)
    assert view["error"] == {
        "code": "provider_unreachable",
        "message": "the service could not connect to the model provider",
    }
    assert "gw.example" not in json.dumps(view)  # the URL stays in the run item and the log
