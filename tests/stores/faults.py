"""Client-level fault injection for aiobotocore S3 clients.

Faults are answered from a ``before-send`` event hook, the same seam botocore
uses for stubbing: the request never reaches the server, and the store sees
exactly what it would see had S3 answered with that status and error body.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiobotocore.awsrequest import AioAWSResponse
from botocore.awsrequest import HTTPHeaders


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def read(self) -> bytes:
        return self._data


def error_response(url: str, status: int, code: str, message: str = "injected") -> AioAWSResponse:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    ).encode()
    headers = HTTPHeaders()
    headers["content-type"] = "application/xml"
    headers["content-length"] = str(len(body))
    return AioAWSResponse(url, status, headers, _Body(body))


@dataclass(eq=False)
class FaultInjector:
    """Answers the next ``count`` matching requests with an error; counts all requests.

    ``operations`` names S3 operations (``"PutObject"``); empty means every one.
    """

    status: int = 0
    code: str = ""
    count: int = 0
    operations: frozenset[str] = frozenset()
    seen: list[str] = field(default_factory=list)
    injected: int = 0

    def arm(self, status: int, code: str, *, count: int, operations: set[str]) -> None:
        self.status, self.code, self.count = status, code, count
        self.operations = frozenset(operations)
        self.injected = 0

    def __call__(self, request: Any, event_name: str, **_: Any) -> AioAWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        self.seen.append(operation)
        if self.injected < self.count and (not self.operations or operation in self.operations):
            self.injected += 1
            return error_response(request.url, self.status, self.code)
        return None


def install(client: Any) -> FaultInjector:
    injector = FaultInjector()
    handler: Callable[..., AioAWSResponse | None] = injector
    client.meta.events.register("before-send.s3", handler)
    return injector
