"""An HTTP request as API Gateway HTTP API (payload 2.0) hands it to a function, and the
function's answer back as HTTP (pure: no sockets).

What API Gateway does and this mirrors: it routes only the declared routes
(:mod:`awaken_s3.service.routes`, which template.yaml is checked against)
(anything else is its own 404 and never reaches the function), fills ``routeKey`` and
``pathParameters``, lower-cases header names and joins repeated ones with commas, moves cookies
into ``cookies``, joins repeated query parameters with commas, base64-encodes a body that is
not UTF-8 text, and puts the JWT authorizer's verified claims in
``requestContext.authorizer.jwt.claims``.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from awaken_s3.service.routes import HTTP_ROUTES, HttpRoute
from awaken_s3.service.routes import route_for as route_for

#: kept under these names: tests and tools route requests as the dev server does
ROUTES: Final = HTTP_ROUTES
Route = HttpRoute


@dataclass(frozen=True)
class HttpRequest:
    method: str
    #: the path and query as sent (``/runs/r1/partial?after=3``)
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""
    source_ip: str = "127.0.0.1"


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def _joined(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    joined: dict[str, str] = {}
    for name, value in pairs:
        joined[name] = f"{joined[name]},{value}" if name in joined else value
    return joined


def jwt_claims(sub: str, *, issuer: str, audience: str, now: float) -> dict[str, str]:
    """The claims a JWT authorizer passes on (API Gateway hands them over as strings)."""
    return {
        "sub": sub,
        "iss": issuer,
        "aud": audience,
        "iat": str(int(now)),
        "exp": str(int(now) + 3600),
    }


def http_api_event(
    request: HttpRequest,
    route: HttpRoute,
    path_parameters: Mapping[str, str],
    *,
    claims: Mapping[str, str] | None,
    api_id: str = "awaken-dev",
    account_id: str = "123456789012",
    domain: str = "127.0.0.1",
    request_id: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The payload 2.0 event API Gateway would build for ``request`` on ``route``."""
    now = time.time() if now is None else now
    split = urllib.parse.urlsplit(request.target)
    path = split.path or "/"
    headers = _joined((name.lower(), value) for name, value in request.headers)
    cookie_header = headers.pop("cookie", None)
    query_pairs = urllib.parse.parse_qsl(split.query, keep_blank_values=True)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.key,
        "rawPath": path,
        "rawQueryString": split.query,
        "headers": headers,
        "requestContext": {
            "accountId": account_id,
            "apiId": api_id,
            "domainName": domain,
            "domainPrefix": domain.split(".", 1)[0],
            "http": {
                "method": request.method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": request.source_ip,
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": request_id or uuid.uuid4().hex,
            "routeKey": route.key,
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": False,
    }
    if cookie_header:
        event["cookies"] = [c.strip() for c in cookie_header.split(";") if c.strip()]
    if query_pairs:
        event["queryStringParameters"] = _joined(query_pairs)
    if path_parameters:
        event["pathParameters"] = dict(path_parameters)
    if claims is not None:
        event["requestContext"]["authorizer"] = {"jwt": {"claims": dict(claims), "scopes": None}}
    if request.body:
        try:
            event["body"] = request.body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(request.body).decode("ascii")
            event["isBase64Encoded"] = True
    return event


def gateway_error(status: int, message: str) -> HttpResponse:
    """An answer API Gateway gives itself (no route, authorizer refusal): ``{"message"}``."""
    return HttpResponse(
        status,
        (("Content-Type", "application/json"),),
        json.dumps({"message": message}).encode("utf-8"),
    )


def http_response(result: Any) -> HttpResponse:
    """The HTTP answer API Gateway makes of a payload 2.0 function's result.

    A result without ``statusCode`` is taken as a JSON body with status 200, as API Gateway
    does for payload 2.0; a result it cannot read is its 500 ``Internal Server Error``.
    """
    if not isinstance(result, Mapping) or "statusCode" not in result:
        try:
            body = json.dumps(result).encode("utf-8")
        except (TypeError, ValueError):
            return gateway_error(500, "Internal Server Error")
        return HttpResponse(200, (("Content-Type", "application/json"),), body)
    try:
        status = int(result["statusCode"])
    except (TypeError, ValueError):
        return gateway_error(500, "Internal Server Error")
    headers: list[tuple[str, str]] = [
        (str(name), str(value)) for name, value in (result.get("headers") or {}).items()
    ]
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers.extend((str(name), str(value)) for value in values)
    headers.extend(("Set-Cookie", str(cookie)) for cookie in result.get("cookies") or ())
    raw = result.get("body")
    if raw is None:
        body = b""
    elif result.get("isBase64Encoded"):
        body = base64.b64decode(str(raw))
    else:
        body = str(raw).encode("utf-8")
    return HttpResponse(status, tuple(headers), body)


# -- the WebSocket API

#: the WebSocket API's stage (template.yaml's SocketStage)
SOCKET_STAGE: Final = "live"
_EVENT_TYPES: Final = {"$connect": "CONNECT", "$disconnect": "DISCONNECT"}


def connection_id() -> str:
    """A new connection id in API Gateway's shape (12 base64 characters, ``=``-padded)."""
    return base64.b64encode(uuid.uuid4().bytes[:9]).decode("ascii").replace("/", "_") + "="


def socket_event(
    route_key: str,
    connection: str,
    *,
    principal: str | None,
    body: str | None = None,
    query: Mapping[str, str] | None = None,
    connected_at: float,
    api_id: str = "awaken-dev",
    domain: str = "127.0.0.1",
    source_ip: str = "127.0.0.1",
    now: float | None = None,
) -> dict[str, Any]:
    """The event API Gateway's WebSocket API hands a route's Lambda integration.

    ``principal`` is what the ``$connect`` authorizer allowed (its ``principalId`` and the
    ``sub`` of its context); API Gateway passes that context on every route of the
    connection.
    """
    now = time.time() if now is None else now
    context: dict[str, Any] = {
        "routeKey": route_key,
        "eventType": _EVENT_TYPES.get(route_key, "MESSAGE"),
        "messageDirection": "IN",
        "stage": SOCKET_STAGE,
        "connectedAt": int(connected_at * 1000),
        "requestTimeEpoch": int(now * 1000),
        "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
        "identity": {"sourceIp": source_ip},
        "requestId": uuid.uuid4().hex,
        "domainName": domain,
        "connectionId": connection,
        "apiId": api_id,
    }
    if principal is not None:
        context["authorizer"] = {"principalId": principal, "sub": principal}
    event: dict[str, Any] = {"requestContext": context, "isBase64Encoded": False}
    if route_key == "$connect" and query:
        event["queryStringParameters"] = dict(query)
    if body is not None:
        event["body"] = body
    return event
