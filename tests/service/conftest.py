"""Fixtures for the handler tests: fresh resources per test on the suite's moto server,
Lambda events built from ``sam local generate-event`` output (events/), a fake Lambda
context, and a fake event source mapping that feeds queue messages to the worker the way
Lambda does."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext

from awaken_s3.dev.apigw import route_for
from awaken_s3.local.moto import MotoServer
from awaken_s3.service.scoping import scoped_id
from awaken_s3.service.wiring import Services, open_services, warm_runtime
from awaken_s3.settings import StorageSettings
from awaken_s3.threads import create_table

EVENTS = Path(__file__).parent / "events"
MODEL = "scripted-1"
MARGIN = 1.0
#: the caller ``http_event`` authenticates by default
SUB = "user-a"
T = TypeVar("T")


def stored(public_id: str, sub: str = SUB) -> str:
    """The id the table, the queue and the bucket hold for a caller's thread or run id."""
    return scoped_id(sub, public_id)


@dataclass
class Aws:
    endpoint_url: str
    bucket: str
    table: str
    queue_url: str
    sqs: Any = field(repr=False)

    def run(self, operation: Callable[[Services], Awaitable[T]]) -> T:
        """Run ``operation`` against the stores, as a handler would (its own event loop)."""

        async def go() -> T:
            async with open_services(StorageSettings.from_env(need_queue=True)) as services:
                return await operation(services)

        return asyncio.run(go())

    def receive(self, *, max_messages: int = 10) -> list[dict[str, Any]]:
        response = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=max_messages,
            MessageSystemAttributeNames=["All"],
            WaitTimeSeconds=0,
            VisibilityTimeout=30,
        )
        messages: list[dict[str, Any]] = response.get("Messages", [])
        return messages

    def delete(self, message: dict[str, Any]) -> None:
        self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])

    def release(self, message: dict[str, Any]) -> None:
        """What the visibility timeout does for a failed record: make it receivable again."""
        self.sqs.change_message_visibility(
            QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )


@pytest.fixture
def aws(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Aws:
    """A fresh bucket, table and FIFO queue (with its dead-letter queue), and the
    environment the template gives both functions."""
    url = moto_server.endpoint_url
    suffix = uuid.uuid4().hex[:10]
    bucket, table = f"awaken-{suffix}", f"awaken-{suffix}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    sqs = boto3.client("sqs")
    dlq = sqs.create_queue(QueueName=f"dlq-{suffix}.fifo", Attributes={"FifoQueue": "true"})
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq["QueueUrl"], AttributeNames=["QueueArn"])
    queue = sqs.create_queue(
        QueueName=f"runs-{suffix}.fifo",
        Attributes={
            "FifoQueue": "true",
            "VisibilityTimeout": "30",
            "RedrivePolicy": json.dumps(
                {
                    "deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"],
                    "maxReceiveCount": "5",
                }
            ),
        },
    )

    async def make_table() -> None:
        import aioboto3

        async with aioboto3.Session().client("dynamodb") as db:
            await create_table(db, table)

    asyncio.run(make_table())
    env = {
        "AWAKEN_BUCKET": bucket,
        "AWAKEN_TABLE": table,
        "AWAKEN_QUEUE_URL": queue["QueueUrl"],
        "AWAKEN_CHECKPOINT_PREFIX": "checkpoints/",
        "AWAKEN_PROVIDER": "anthropic",
        "AWAKEN_MODEL": MODEL,
        "AWAKEN_DEADLINE_MARGIN_SECONDS": str(MARGIN),
        "AWAKEN_LEASE_SECONDS": "30",
        "POWERTOOLS_SERVICE_NAME": "awaken-test",
        "POWERTOOLS_METRICS_NAMESPACE": "awaken-test",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWAKEN_ALLOWED_MODELS", raising=False)
    # The handlers keep their clients for the process: new ones per test, so that botocore
    # hooks a test registers on the shared session reach them.
    warm_runtime().reset()
    return Aws(url, bucket, table, queue["QueueUrl"], sqs)


# -- Lambda context


@dataclass
class FakeContext:
    """The LambdaContext attributes Powertools and the handlers read."""

    remaining_ms: int = 300_000
    function_name: str = "awaken-worker"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:awaken-worker"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/awaken-worker"
    log_stream_name: str = "2026/11/30/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms

    @property
    def lambda_context(self) -> LambdaContext:
        return cast(LambdaContext, self)


# -- API Gateway HTTP API (payload 2.0) events


def _template(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return loaded


_HTTP_TEMPLATE = _template("http_api_v2.json")
_SQS_TEMPLATE = _template("sqs_receive_message.json")


def _route(method: str, path: str) -> tuple[str, dict[str, str] | None]:
    """The routeKey and path parameters API Gateway gives the function for a request."""
    found = route_for(method, path)
    if found is None:
        # API Gateway itself answers unknown routes; a $default route would pass them on.
        return "$default", None
    route, parameters = found
    return route.key, parameters or None


def http_event(
    method: str,
    path: str,
    *,
    sub: str | None = SUB,
    body: Any = None,
    raw_body: str | None = None,
    base64_body: bool = False,
    claims: dict[str, Any] | None = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An HTTP API request behind a JWT authorizer; ``sub=None`` drops the authorizer block."""
    event = copy.deepcopy(_HTTP_TEMPLATE)
    route_key, path_parameters = _route(method, path)
    event["routeKey"] = route_key
    event["rawPath"] = path
    event["rawQueryString"] = urllib.parse.urlencode(query or {})
    if query:
        event["queryStringParameters"] = dict(query)
    else:
        event.pop("queryStringParameters", None)
    event.pop("stageVariables", None)
    if path_parameters:
        event["pathParameters"] = path_parameters
    else:
        event.pop("pathParameters", None)
    event.pop("cookies", None)
    event["headers"] = {"content-type": "application/json", "host": "id.execute-api.amazonaws.com"}
    # API Gateway hands a payload 2.0 function its header names in lower case.
    event["headers"].update({name.lower(): value for name, value in (headers or {}).items()})
    context = event["requestContext"]
    context["http"]["method"] = method
    context["http"]["path"] = path
    context["requestId"] = uuid.uuid4().hex
    context["routeKey"] = route_key
    if sub is None and claims is None:
        context.pop("authorizer", None)
    else:
        context["authorizer"] = {
            "jwt": {
                "claims": claims
                if claims is not None
                else {"sub": sub, "iss": "https://issuer.example.com", "aud": "awaken"},
                "scopes": None,
            }
        }
    text = raw_body if raw_body is not None else (None if body is None else json.dumps(body))
    if text is None:
        event.pop("body", None)
        event["isBase64Encoded"] = False
    elif base64_body:
        event["body"] = base64.b64encode(text.encode()).decode()
        event["isBase64Encoded"] = True
    else:
        event["body"] = text
        event["isBase64Encoded"] = False
    return event


# -- SQS events


def sqs_record(
    body: str,
    *,
    message_id: str | None = None,
    group_id: str | None = None,
    attributes: dict[str, str] | None = None,
    receipt_handle: str = "handle",
    queue_arn: str = "arn:aws:sqs:us-east-1:123456789012:awaken-runs.fifo",
) -> dict[str, Any]:
    record: dict[str, Any] = copy.deepcopy(_SQS_TEMPLATE["Records"][0])
    record["messageId"] = message_id or str(uuid.uuid4())
    record["receiptHandle"] = receipt_handle
    record["body"] = body
    record["eventSourceARN"] = queue_arn
    attrs = dict(record["attributes"])
    if group_id is not None:
        # What Lambda adds for a FIFO queue.
        attrs.update(
            {
                "MessageGroupId": group_id,
                "MessageDeduplicationId": uuid.uuid4().hex,
                "SequenceNumber": str(uuid.uuid4().int)[:20],
            }
        )
    attrs.update(attributes or {})
    record["attributes"] = attrs
    return record


def record_from_message(message: dict[str, Any], aws: Aws) -> dict[str, Any]:
    """The event record Lambda builds from a received SQS message."""
    name = aws.queue_url.rsplit("/", 1)[-1]
    record = sqs_record(
        message["Body"],
        message_id=message["MessageId"],
        receipt_handle=message["ReceiptHandle"],
        queue_arn=f"arn:aws:sqs:us-east-1:123456789012:{name}",
    )
    record["attributes"] = dict(message.get("Attributes", {}))
    return record


def sqs_event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def emf_metrics(output: str) -> dict[str, float]:
    """Metric values from the EMF lines a handler printed (summed over lines)."""
    totals: dict[str, float] = {}
    for line in output.splitlines():
        try:
            blob = json.loads(line)
        except ValueError:
            continue
        if not isinstance(blob, dict) or "_aws" not in blob:
            continue
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = blob[metric["Name"]]
                values = value if isinstance(value, list) else [value]
                totals[metric["Name"]] = totals.get(metric["Name"], 0) + sum(values)
    return totals


def api_call(
    handler: Callable[[dict[str, Any], LambdaContext], dict[str, Any]],
    method: str,
    path: str,
    **kwargs: Any,
) -> dict[str, Any]:
    """A successful call of an HTTP API ``handler`` (an app's); its decoded body."""
    response = handler(http_event(method, path, **kwargs), FakeContext().lambda_context)
    assert int(response["statusCode"]) < 300, response
    body: dict[str, Any] = json.loads(response["body"])
    return body
