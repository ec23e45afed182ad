"""The real SQS worker (handlers/worker.py) runs under the local event source: Powertools accepts
the emulated context and event, and the run queued by the HTTP API completes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from awaken_s3.demo.model import ANSWER
from awaken_s3.local.containers import FunctionConfig
from awaken_s3.local.event_source import EventSourceThread, SqsEventSource
from handlers import api
from tests.local.conftest import Sqs, eventually_sync, provision
from tests.service.conftest import FakeContext, http_event

pytestmark = pytest.mark.slow


def call_api(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    response = api.lambda_handler(http_event(method, path, **kwargs), FakeContext().lambda_context)
    assert int(response["statusCode"]) < 300, response
    body: dict[str, Any] = json.loads(response["body"])
    return body


def test_the_worker_completes_a_queued_run_in_a_local_container(
    sqs: Sqs, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffix = uuid.uuid4().hex[:10]
    bucket = table = f"awaken-{suffix}"
    queue_url, _ = sqs.queue(fifo=True, visibility=30, max_receive_count=5)
    env = {
        "AWS_ENDPOINT_URL": sqs.endpoint_url,
        "AWAKEN_BUCKET": bucket,
        "AWAKEN_TABLE": table,
        "AWAKEN_QUEUE_URL": queue_url,
        "AWAKEN_PROVIDER": "anthropic",
        "AWAKEN_MODEL": "scripted-1",
        "AWAKEN_DEADLINE_MARGIN_SECONDS": "1",
        "POWERTOOLS_SERVICE_NAME": "awaken-test",
        "POWERTOOLS_METRICS_NAMESPACE": "awaken-test",
    }
    provision(sqs, monkeypatch, env)
    thread = call_api("POST", "/threads")
    call_api(
        "POST",
        f"/threads/{thread['thread_id']}/runs",
        body={"message": "What is a stream checkpoint?", "run_id": "run-1"},
    )

    config = FunctionConfig("tests.local.worker_handler:lambda_handler", timeout=30, env=env)
    source = SqsEventSource(queue_url, config, endpoint_url=sqs.endpoint_url)
    with EventSourceThread(source):
        eventually_sync(lambda: bool(source.results()), what="the start message served")
    run = call_api("GET", "/runs/run-1")
    [result] = source.results()
    assert (result.outcome, result.response) == ("ok", {"batchItemFailures": []})
    assert run["status"] == "completed"
    messages = call_api("GET", f"/threads/{thread['thread_id']}")["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert "".join(b.get("text", "") for b in messages[1]["content"]) == ANSWER
    assert sqs.counts(queue_url) == (0, 0)
