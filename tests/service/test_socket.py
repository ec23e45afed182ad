"""The WebSocket API's handler, invoked as API Gateway invokes it, against DynamoDB and S3 on
moto, its frames posted through the management API to a local stand-in (real HTTP, the
endpoint from botocore's AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI): a caller follows only
its own runs, a follow is recorded where its catch-up left it, a disconnect only forgets,
and a cancel ends the run for every follower."""

from __future__ import annotations

import json
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext

from awaken_s3.dev.apigw import socket_event
from awaken_s3.messages import Message
from awaken_s3.service.connections import ConnectionStore
from awaken_s3.service.connections import table_definition as connection_table
from awaken_s3.service.socket import lambda_handler
from awaken_s3.service.wiring import Services
from awaken_s3.threads.models import RunSettings, RunStatus
from tests.service.conftest import MODEL, SUB, Aws, FakeContext, stored


class Management:
    """PostToConnection's stand-in: the frames each connection got; ``gone`` answer 410."""

    def __init__(self) -> None:
        self.frames: dict[str, list[dict[str, Any]]] = {}
        self.gone: set[str] = set()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                connection = urllib.parse.unquote(self.path.rsplit("/", 1)[-1])
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if connection in owner.gone:
                    self.send_response(410)
                    self.send_header("x-amzn-ErrorType", "GoneException")
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                    return
                owner.frames.setdefault(connection, []).append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def kinds(self, connection: str) -> list[str]:
        return [frame["type"] for frame in self.frames.get(connection, [])]


@pytest.fixture
def sockets(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Management]:
    table = f"connections-{uuid.uuid4().hex[:8]}"
    boto3.client("dynamodb").create_table(TableName=table, **connection_table())
    management = Management()
    management.thread.start()
    monkeypatch.setenv("AWAKEN_CONNECTIONS_TABLE", table)
    monkeypatch.setenv("AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI", management.url)
    try:
        yield management
    finally:
        management.server.shutdown()
        management.server.server_close()
        management.thread.join()


def invoke(route: str, connection: str, *, sub: str | None = SUB, **body: Any) -> Any:
    event = socket_event(
        route,
        connection,
        principal=sub,
        body=json.dumps({"action": route, **body}) if body else None,
        connected_at=0.0,
    )
    return lambda_handler(event, cast(LambdaContext, FakeContext()))


def seed(aws: Aws, run: str = "r1") -> None:
    async def go(services: Services) -> None:
        await services.threads.create_thread(stored("t1"), owner=SUB)
        await services.threads.create_run(
            stored(run),
            thread_id=stored("t1"),
            owner=SUB,
            settings=RunSettings(model=MODEL),
            messages=[Message.user("hi")],
        )

    aws.run(go)


def followers(aws: Aws, run: str = "r1") -> list[Any]:
    import os

    async def go(services: Services) -> list[Any]:
        store = ConnectionStore(os.environ["AWAKEN_CONNECTIONS_TABLE"], services.dynamodb)
        return await store.followers(stored(run))

    return aws.run(go)


def test_connect_needs_the_authorizer_s_principal(aws: Aws, sockets: Management) -> None:
    assert invoke("$connect", "c0=", sub=None) == {"statusCode": 401}
    assert invoke("$connect", "c1=") == {"statusCode": 200}


def test_a_caller_follows_only_its_own_runs(aws: Aws, sockets: Management) -> None:
    seed(aws)
    invoke("$connect", "other=", sub="user-b")
    invoke("follow", "other=", run_id="r1")
    (refusal,) = sockets.frames["other="]
    assert (refusal["type"], refusal["code"]) == ("error", "not_found")
    assert followers(aws) == []


def test_a_follow_is_recorded_where_its_catch_up_left_it_and_a_disconnect_only_forgets(
    aws: Aws, sockets: Management
) -> None:
    seed(aws)
    invoke("$connect", "c1=")
    invoke("follow", "c1=", run_id="r1", after=0)
    assert sockets.frames["c1="] == [{"type": "following", "run_id": "r1", "turn": 0, "offset": 0}]
    (follower,) = followers(aws)
    assert (follower.connection_id, follower.run_id, follower.position.turn) == ("c1=", "r1", 0)

    invoke("$disconnect", "c1=")
    assert followers(aws) == []

    async def status(services: Services) -> RunStatus:
        return (await services.threads.get_run(stored("r1"))).status

    assert aws.run(status) == RunStatus.QUEUED  # a dropped connection cancels nothing


def test_a_cancel_ends_the_run_for_every_follower_and_a_gone_one_is_forgotten(
    aws: Aws, sockets: Management
) -> None:
    seed(aws)
    for connection in ("c1=", "c2=", "gone="):
        invoke("$connect", connection)
        invoke("follow", connection, run_id="r1")
    sockets.gone.add("gone=")
    invoke("cancel", "c2=", run_id="r1")
    assert sockets.kinds("c2=") == ["following", "cancel", "run_ended"]
    assert sockets.kinds("c1=") == ["following", "run_ended"]
    assert sockets.frames["c1="][-1] == {
        "type": "run_ended",
        "run_id": "r1",
        "status": "cancelled",
        "error": None,
    }
    assert {f.connection_id for f in followers(aws)} == {"c1=", "c2="}
    # A follow of an ended run is its end, and is not recorded.
    invoke("$connect", "late=")
    invoke("follow", "late=", run_id="r1")
    assert sockets.kinds("late=") == ["following", "run_ended"]
    assert "late=" not in {f.connection_id for f in followers(aws)}


def test_bad_messages_get_an_error_frame(aws: Aws, sockets: Management) -> None:
    invoke("$connect", "c1=")
    invoke("follow", "c1=", run_id="../etc")
    invoke("follow", "c1=", run_id="r1", after=-1)
    invoke("dance", "c1=", run_id="r1")
    codes = [frame["code"] for frame in sockets.frames["c1="]]
    assert codes == ["invalid_id", "invalid_message", "unknown_action"]
