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
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext

from awaken_s3 import Agent, App, tool
from awaken_s3.dev.apigw import socket_event
from awaken_s3.messages import Message
from awaken_s3.service.connections import MAX_FOLLOWS, ConnectionStore
from awaken_s3.service.connections import table_definition as connection_table
from awaken_s3.service.frames import ERROR_MESSAGES, FollowedText, text_frame
from awaken_s3.service.push import Delivery, FrameSender
from awaken_s3.service.socket import lambda_handler
from awaken_s3.service.wiring import Services
from awaken_s3.streaming.scripted import ScriptedProvider, finish, text_turn, tool_call
from awaken_s3.threads.models import RunSettings, RunStatus
from tests.service.conftest import (
    MODEL,
    SUB,
    Aws,
    FakeContext,
    api_call,
    record_from_message,
    sqs_event,
    stored,
)

#: API Gateway's WebSocket frame (32 KB) and message (128 KB) size quotas
FRAME_QUOTA = 32 * 1024
MESSAGE_QUOTA = 128 * 1024


class Management:
    """PostToConnection's stand-in: the frames each connection got; ``gone`` answer 410;
    a message over API Gateway's 128 KB, or one ``refuse`` picks, is answered 413
    ``PayloadTooLargeException`` (``refused`` counts each post of it)."""

    def __init__(self) -> None:
        self.frames: dict[str, list[dict[str, Any]]] = {}
        self.gone: set[str] = set()
        self.sizes: list[int] = []
        self.refuse: Callable[[dict[str, Any]], bool] = lambda frame: False
        self.refused: list[dict[str, Any]] = []
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
                frame = json.loads(body)
                if len(body) > MESSAGE_QUOTA or owner.refuse(frame):
                    owner.refused.append(frame)
                    self.send_response(413)
                    self.send_header("x-amzn-ErrorType", "PayloadTooLargeException")
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                    return
                owner.sizes.append(len(body))
                owner.frames.setdefault(connection, []).append(frame)
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


# -- frames within API Gateway's limits, and a follower always told the end


def raw(route: str, connection: str, body: Any) -> Any:
    """The handler's answer to a message whose body is exactly ``body``."""
    event = socket_event(route, connection, principal=SUB, body=body, connected_at=0.0)
    return lambda_handler(event, cast(LambdaContext, FakeContext()))


def start_app_run(app: App, run_id: str, message: str = "go") -> None:
    handler = app.api_handler()
    api_call(handler, "POST", "/threads", body={"thread_id": "t1"})
    api_call(handler, "POST", "/threads/t1/runs", body={"message": message, "run_id": run_id})


def run_worker(aws: Aws, app: App, model: ScriptedProvider) -> None:
    """Hand what the queue holds to the app's worker, as Lambda's event source would."""
    messages = aws.receive()
    assert messages
    event = sqs_event(*(record_from_message(m, aws) for m in messages))
    response = app.worker_handler(provider_factory=lambda: model)(
        event, FakeContext().lambda_context
    )
    assert response == {"batchItemFailures": []}
    for message in messages:
        aws.delete(message)


def view_of(frames: list[dict[str, Any]]) -> FollowedText:
    view = FollowedText()
    for frame in frames:
        view.apply(frame)
    return view


#: 200 KB of input, with what JSON escapes (quotes, backslashes, control characters) and
#: what UTF-8 takes 2 to 4 bytes for: characters are not bytes
BIG = ('é€😀 "quoted" \\ back\x01\n' * 9000)[:200_000]


def test_a_200_kb_tool_input_reaches_a_follower_in_frames_within_the_limit(
    aws: Aws, sockets: Management
) -> None:
    stored_blobs: list[str] = []

    @tool
    def store(blob: str) -> str:
        """Store a blob."""
        stored_blobs.append(blob)
        return "stored"

    app = App([Agent("keeper", tools=[store])])
    model = ScriptedProvider(
        [
            [
                *tool_call(0, "store", {"blob": BIG}, call_id="call_0", chunk=20_000),
                *finish("tool_use"),
            ],
            text_turn("done"),
        ]
    )
    start_app_run(app, "r1")
    for connection in ("c1=", "gone="):
        invoke("$connect", connection)
        invoke("follow", connection, run_id="r1")
    sockets.gone.add("gone=")
    run_worker(aws, app, model)
    assert stored_blobs == [BIG]
    assert sockets.refused == [] and max(sockets.sizes) <= FRAME_QUOTA
    assert sockets.kinds("c1=")[-2:] == ["turn_committed", "run_ended"]

    view = view_of(sockets.frames["c1="])
    ((call),) = view.calls_of(0)
    assert (call.id, call.name, call.input) == ("call_0", "store", {"blob": BIG})
    assert view.committed == {0: "", 1: "done"}
    assert (view.status, view.gaps, view.skipped) == ("completed", [], [])
    assert len(json.dumps({"blob": BIG}, ensure_ascii=False).encode()) > 4 * FRAME_QUOTA
    assert followers(aws) == []  # told the end: the follow is over
    assert [item["sk"]["S"] for item in connection_items("c1=")] == ["CONN"]
    assert connection_items("gone=") == []  # the worker found it gone: no record left

    # A late follow is caught up from the thread: the same input, then the end.
    invoke("$connect", "late=")
    assert invoke("follow", "late=", run_id="r1", turn=0) == {"statusCode": 200}
    late = view_of(sockets.frames["late="])
    assert late.calls_of(0)[0].input == {"blob": BIG}
    assert (late.committed, late.status) == ({0: "", 1: "done"}, "completed")
    assert max(sockets.sizes) <= FRAME_QUOTA


def test_a_frame_refused_as_too_large_is_posted_once_and_the_rest_still_goes(
    aws: Aws, sockets: Management
) -> None:
    sockets.refuse = lambda frame: frame["type"] == "text" and frame["offset"] == 0
    app = App([Agent("plain")])
    start_app_run(app, "r1")
    invoke("$connect", "c1=")
    invoke("follow", "c1=", run_id="r1")
    run_worker(aws, app, ScriptedProvider([text_turn("Hello there, follower.")]))

    assert [(f["type"], f["offset"]) for f in sockets.refused] == [("text", 0)]
    kinds = sockets.kinds("c1=")
    assert kinds[0] == "following" and kinds[-2:] == ["turn_committed", "run_ended"]
    view = view_of(sockets.frames["c1="])
    assert [(f["of"], f["turn"], f["offset"]) for f in view.skipped] == [("text", 0, 0)]
    assert view.status == "completed"

    # The socket handler's catch-up of the ended run: the same, and no raise.
    invoke("$connect", "late=")
    assert invoke("follow", "late=", run_id="r1", turn=0) == {"statusCode": 200}
    assert sockets.kinds("late=") == ["following", "skipped", "turn_committed", "run_ended"]
    assert len(sockets.refused) == 2


# -- follows per connection, and a gone connection's records


def connection_items(connection: str) -> list[dict[str, Any]]:
    import os

    table = os.environ["AWAKEN_CONNECTIONS_TABLE"]
    items: list[dict[str, Any]] = boto3.client("dynamodb").scan(TableName=table)["Items"]
    return [item for item in items if connection in item["pk"]["S"] + item["sk"]["S"]]


def test_a_connection_follows_at_most_max_follows_runs(aws: Aws, sockets: Management) -> None:
    seed_run(aws, *(f"r{n}" for n in range(MAX_FOLLOWS + 1)))
    invoke("$connect", "c1=")
    for n in range(MAX_FOLLOWS):
        invoke("follow", "c1=", run_id=f"r{n}")
    invoke("follow", "c1=", run_id="r0")  # the same run again takes no second place
    invoke("follow", "c1=", run_id=f"r{MAX_FOLLOWS}")
    refusal = sockets.frames["c1="][-1]
    assert (refusal["type"], refusal["code"], refusal["run_id"]) == (
        "error",
        "too_many_follows",
        f"r{MAX_FOLLOWS}",
    )
    assert followers(aws, f"r{MAX_FOLLOWS}") == []
    assert len(connection_items("c1=")) == 1 + MAX_FOLLOWS

    # A followed run that ended, though nobody told this follower, frees its place.
    async def end(services: Services) -> None:
        await services.threads.cancel_run(stored("r3"))

    aws.run(end)
    invoke("follow", "c1=", run_id=f"r{MAX_FOLLOWS}")
    assert sockets.frames["c1="][-1]["type"] == "following"
    assert [f.connection_id for f in followers(aws, f"r{MAX_FOLLOWS}")] == ["c1="]
    assert followers(aws, "r3") == []
    assert len(connection_items("c1=")) == 1 + MAX_FOLLOWS


def test_a_gone_connection_leaves_no_record(aws: Aws, sockets: Management) -> None:
    seed_run(aws, "r1", "r2", "r3")
    invoke("$connect", "c1=")
    invoke("follow", "c1=", run_id="r1")
    invoke("follow", "c1=", run_id="r2")
    assert len(connection_items("c1=")) == 3
    sockets.gone.add("c1=")  # went away without a $disconnect (410 from the management API)
    invoke("follow", "c1=", run_id="r3")
    assert connection_items("c1=") == []
    # And a $disconnect leaves nothing either.
    invoke("$connect", "c2=")
    invoke("follow", "c2=", run_id="r1")
    invoke("follow", "c2=", run_id="r2")
    invoke("$disconnect", "c2=")
    assert connection_items("c2=") == []


def seed_run(aws: Aws, *runs: str) -> None:
    """Runs of the caller, each on a thread of its own (one live run per thread)."""

    async def go(services: Services) -> None:
        for run in runs:
            await services.threads.create_thread(stored(f"t-{run}"), owner=SUB)
            await services.threads.create_run(
                stored(run),
                thread_id=stored(f"t-{run}"),
                owner=SUB,
                settings=RunSettings(model=MODEL),
                messages=[Message.user("hi")],
            )

    aws.run(go)


# -- messages the handler cannot parse


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("[" * 5000 + "]" * 5000, "invalid_message"),
        ('{"action": "follow", "run_id": ' + "[" * 5000 + "]" * 5000 + "}", "invalid_message"),
        ('{"action": "follow", "run_id": ' + "[" * 2000 + "]" * 2000 + "}", "invalid_message"),
        ('{"action": "follow", "run_id": "r1", "x": ' + "[" * 9 + "]" * 9 + "}", "invalid_message"),
        ('{"action": "follow", "run_id": [["EVIL"]]}', "invalid_id"),
        ('{"action": "follow", "run_id": "nope", "note": "\\"' + "[" * 20 + '"}', "not_found"),
        ('{"a":' * 1300 + "1" + "}" * 1300, "invalid_message"),
        ('{"action": "follow", "run_id": "r1", "pad": "' + "x" * 200_000 + '"}', "invalid_message"),
        ("follow r1 please", "invalid_message"),
        ('["follow", "r1"]', "invalid_message"),
        ('{"action": "follow", "run_id": {"EVIL": 1}}', "invalid_id"),
        ('{"action": "follow", "run_id": ["EVIL"]}', "invalid_id"),
        ('{"action": "follow", "run_id": "<EVIL>"}', "invalid_id"),
        ('{"action": "follow", "run_id": "r1", "after": "EVIL"}', "invalid_message"),
        ('{"action": "follow", "run_id": "r1", "turn": 1.5}', "invalid_message"),
        ('{"action": "follow", "run_id": "\ud800EVIL"}', "invalid_message"),
        (None, "invalid_message"),
    ],
    ids=[
        "5000-deep",
        "run-id-5000-deep",
        "run-id-2000-deep-under-the-size",
        "a-field-9-deep",
        "run-id-shallow-list",
        "brackets-in-a-string-are-not-nesting",
        "1300-deep-object",
        "oversized",
        "not-json",
        "not-an-object",
        "run-id-object",
        "run-id-list",
        "run-id-free-text",
        "after-a-string",
        "turn-a-float",
        "not-utf-8",
        "no-body",
    ],
)
def test_a_message_the_handler_cannot_parse_gets_a_fixed_error_frame(
    aws: Aws, sockets: Management, body: str | None, code: str
) -> None:
    invoke("$connect", "c1=")
    assert raw("follow", "c1=", body) == {"statusCode": 200}
    (frame,) = sockets.frames["c1="]
    assert (frame["type"], frame["code"]) == ("error", code)
    assert frame["message"] == ERROR_MESSAGES[code]
    assert "EVIL" not in json.dumps(frame)


def test_the_sender_never_posts_a_refused_frame_again(aws: Aws, sockets: Management) -> None:
    """A batch retried (the skipped frame that replaced it failed to go, say) does not post
    the refused frame a second time; a frame over the bound is never posted at all."""
    sockets.refuse = lambda frame: frame.get("text") == "refused"
    refused = text_frame("r1", 0, 0, "refused")
    oversized = text_frame("r1", 0, 0, "x" * FRAME_QUOTA)

    async def go(services: Services) -> list[Delivery]:
        sender = FrameSender(services.management)
        delivered = [await sender.send("c1=", refused), await sender.send("c1=", refused)]
        delivered.append(await sender.send("c1=", oversized))
        assert await sender.deliver("c1=", refused)  # its skipped frame goes in its place
        return delivered

    assert aws.run(go) == [Delivery.TOO_LARGE] * 3
    assert [frame["text"] for frame in sockets.refused] == ["refused"]
    assert sockets.frames["c1="] == [
        {"type": "skipped", "run_id": "r1", "turn": 0, "of": "text", "offset": 0}
    ]
