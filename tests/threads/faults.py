"""Fault injection at the botocore layer: a ``before-send`` hook on one client.

A handler that returns a response short-circuits the HTTP send (the request never reaches
the server); ``lost_response`` sends the request for real and then raises a read timeout,
so the write lands on the server but the client sees a transport failure. botocore's retry
handler sees exactly what it would see from the network.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from aiobotocore.awsrequest import AioAWSResponse
from botocore.awsrequest import HTTPHeaders
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

_PREFIX = "com.amazonaws.dynamodb.v20120810#"


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self, *args: Any) -> bytes:
        return self._body


def dynamo_error(url: str, status: int, error_type: str, **extra: Any) -> AioAWSResponse:
    body = json.dumps({"__type": _PREFIX + error_type, "message": "injected", **extra}).encode()
    headers = HTTPHeaders()
    headers["content-type"] = "application/x-amz-json-1.0"
    headers["x-amzn-requestid"] = "injected"
    return AioAWSResponse(url, status, headers, _Body(body))


def s3_error(url: str, status: int, code: str) -> AioAWSResponse:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
        "<Message>injected</Message><RequestId>injected</RequestId></Error>"
    ).encode()
    headers = HTTPHeaders()
    headers["content-type"] = "application/xml"
    headers["x-amz-request-id"] = "injected"
    return AioAWSResponse(url, status, headers, _Body(body))


class FaultInjector:
    """Fails the next calls of ``operation`` on ``client`` with ``faults``, in order.

    DynamoDB faults: ``"throttle"`` (400 ProvisionedThroughputExceededException),
    ``"throttling"`` (400 ThrottlingException), ``"500"`` (InternalServerError),
    ``"denied"`` (400 AccessDeniedException), ``"conflict"`` / ``"cancel_throttled"`` (the
    transaction cancelled with TransactionConflict / ThrottlingError on every item),
    ``"lost_response"`` (the write reaches the server, the response is lost). S3 faults
    (``service="s3"``): ``"slowdown"`` (503 SlowDown), ``"500"`` (InternalError). Either:
    ``"unreachable"`` (the connection fails; nothing is sent).
    """

    def __init__(
        self, client: Any, operation: str, faults: list[str], *, service: str = "dynamodb"
    ) -> None:
        self.client = client
        self.faults = list(faults)
        self.service = service
        self.calls = 0
        self.reached_server = 0
        client.meta.events.register(f"before-send.{service}.{operation}", self._handle)

    async def _handle(self, request: Any, **kwargs: Any) -> AioAWSResponse | None:
        self.calls += 1
        if not self.faults:
            self.reached_server += 1
            return None
        fault = self.faults.pop(0)
        if fault == "unreachable":
            raise EndpointConnectionError(endpoint_url=request.url)
        if self.service == "s3":
            if fault == "slowdown":
                return s3_error(request.url, 503, "SlowDown")
            if fault == "500":
                return s3_error(request.url, 500, "InternalError")
            raise AssertionError(f"unknown S3 fault {fault}")
        if fault == "throttle":
            return dynamo_error(request.url, 400, "ProvisionedThroughputExceededException")
        if fault == "throttling":
            return dynamo_error(request.url, 400, "ThrottlingException")
        if fault == "500":
            return dynamo_error(request.url, 500, "InternalServerError")
        if fault == "denied":
            return dynamo_error(request.url, 400, "AccessDeniedException")
        if fault in ("conflict", "cancel_throttled"):
            code = "TransactionConflict" if fault == "conflict" else "ThrottlingError"
            items = json.loads(request.body)["TransactItems"]
            reasons = [{"Code": code, "Message": "injected"} for _ in items]
            return dynamo_error(
                request.url, 400, "TransactionCanceledException", CancellationReasons=reasons
            )
        if fault == "lost_response":
            self.reached_server += 1
            response = await self.client._endpoint.http_session.send(request)
            await response.content
            raise ReadTimeoutError(endpoint_url=request.url)
        raise AssertionError(f"unknown fault {fault}")


class LostResponses:
    """Every ``every``-th write on ``client`` reaches the server, then its response is lost.

    botocore retries it (a connection error); every write must recognise its own earlier
    attempt on the retry, or the run ends up with a duplicate, a spurious conflict or a loss.
    """

    WRITES = ("TransactWriteItems", "UpdateItem", "PutItem")

    def __init__(self, client: Any, every: int, operations: tuple[str, ...] = WRITES) -> None:
        self.client = client
        self.every = every
        self.writes = 0
        self.lost: Counter[str] = Counter()
        for operation in operations:
            client.meta.events.register(
                f"before-send.dynamodb.{operation}", self._handler(operation)
            )

    def _handler(self, operation: str) -> Any:
        async def handle(request: Any, **kwargs: Any) -> None:
            self.writes += 1
            if self.writes % self.every:
                return
            self.lost[operation] += 1
            response = await self.client._endpoint.http_session.send(request)
            await response.content
            raise ReadTimeoutError(endpoint_url=request.url)

        return handle
