"""The dev server's API Gateway (HTTP API, payload 2.0) translation, both ways, and the real API
handler accepting what it builds (awaken_s3.dev.apigw)."""

from __future__ import annotations

import base64
import json

import pytest

from awaken_s3.dev.apigw import (
    HttpRequest,
    http_api_event,
    http_response,
    jwt_claims,
    route_for,
)
from handlers.api import event_problem, subject


@pytest.mark.parametrize(
    ("method", "path", "key", "parameters"),
    [
        ("POST", "/threads", "POST /threads", {}),
        ("GET", "/threads/t-1", "GET /threads/{thread_id}", {"thread_id": "t-1"}),
        ("POST", "/threads/t-1/runs", "POST /threads/{thread_id}/runs", {"thread_id": "t-1"}),
        ("GET", "/runs/r1", "GET /runs/{run_id}", {"run_id": "r1"}),
        ("GET", "/runs/r1/partial", "GET /runs/{run_id}/partial", {"run_id": "r1"}),
        ("POST", "/runs/r1/cancel", "POST /runs/{run_id}/cancel", {"run_id": "r1"}),
        ("GET", "/runs/a%2Fb", "GET /runs/{run_id}", {"run_id": "a/b"}),
    ],
)
def test_declared_routes_are_routed(
    method: str, path: str, key: str, parameters: dict[str, str]
) -> None:
    found = route_for(method, path)
    assert found is not None
    route, params = found
    assert (route.key, params) == (key, parameters)


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/threads"), ("DELETE", "/runs/r1"), ("GET", "/runs/r1/extra"), ("GET", "/runs/")],
)
def test_undeclared_routes_never_reach_the_function(method: str, path: str) -> None:
    assert route_for(method, path) is None


def test_the_event_is_what_the_api_handler_reads() -> None:
    request = HttpRequest(
        method="GET",
        target="/runs/r1/partial?after=5&turn=0&x=1&x=2",
        headers=(
            ("If-None-Match", '"abc"'),
            ("X-Twice", "a"),
            ("x-twice", "b"),
            ("Cookie", "a=1; b=2"),
            ("User-Agent", "tests"),
        ),
    )
    found = route_for("GET", "/runs/r1/partial")
    assert found is not None
    claims = jwt_claims("dev-user", issuer="https://i.example/", audience="aud", now=1000.0)
    event = http_api_event(request, *found, claims=claims, request_id="req-1", now=1000.0)
    assert event_problem(event) is None and subject(event) == "dev-user"
    assert event["routeKey"] == event["requestContext"]["routeKey"] == "GET /runs/{run_id}/partial"
    assert event["rawPath"] == "/runs/r1/partial"
    assert event["rawQueryString"] == "after=5&turn=0&x=1&x=2"
    assert event["queryStringParameters"] == {"after": "5", "turn": "0", "x": "1,2"}
    assert event["pathParameters"] == {"run_id": "r1"}
    assert event["headers"]["if-none-match"] == '"abc"'
    assert event["headers"]["x-twice"] == "a,b"
    assert "cookie" not in event["headers"] and event["cookies"] == ["a=1", "b=2"]
    assert event["requestContext"]["http"]["userAgent"] == "tests"
    assert event["requestContext"]["timeEpoch"] == 1_000_000
    assert "body" not in event and event["isBase64Encoded"] is False


def test_an_event_without_claims_has_no_caller() -> None:
    request = HttpRequest("POST", "/threads", (), b"{}")
    found = route_for("POST", "/threads")
    assert found is not None
    event = http_api_event(request, *found, claims=None)
    assert subject(event) is None and event["body"] == "{}"


def test_a_body_that_is_not_text_is_base64() -> None:
    request = HttpRequest("POST", "/threads", (), b"\xff\x00")
    found = route_for("POST", "/threads")
    assert found is not None
    event = http_api_event(request, *found, claims=None)
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == b"\xff\x00"


def test_function_results_become_http() -> None:
    answer = http_response(
        {
            "statusCode": 201,
            "headers": {"Content-Type": "application/json"},
            "cookies": ["a=1"],
            "body": json.dumps({"ok": True}),
            "isBase64Encoded": False,
        }
    )
    assert answer.status == 201
    assert ("Set-Cookie", "a=1") in answer.headers
    assert json.loads(answer.body) == {"ok": True}
    assert http_response({"statusCode": 304, "headers": {"ETag": '"x"'}}).body == b""
    binary = http_response(
        {"statusCode": 200, "body": base64.b64encode(b"\x01").decode(), "isBase64Encoded": True}
    )
    assert binary.body == b"\x01"


def test_results_api_gateway_would_not_read_as_a_response() -> None:
    # Payload 2.0: a result without statusCode is a 200 JSON body; garbage is its 500.
    assert http_response({"hello": 1}).status == 200
    assert json.loads(http_response({"hello": 1}).body) == {"hello": 1}
    assert http_response({"statusCode": "x"}).status == 500
