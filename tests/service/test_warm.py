"""Warm invocations: the handlers keep one event loop and one set of clients per process,
re-open them after an error that may have broken them, and survive pooled connections that
died while the process was frozen."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiohttp import ServerDisconnectedError
from botocore.exceptions import ClientError, EndpointConnectionError

from awaken_s3.demo.model import ContinuingModel
from awaken_s3.providers.config import ProviderSettings
from awaken_s3.service.wiring import WarmRuntime, poisons, shared_session, warm_runtime
from awaken_s3.service.worker import make_handler
from awaken_s3.settings import StorageSettings
from awaken_s3.threads.errors import RunNotFound, StoreUnavailable
from handlers import api
from tests.service.conftest import Aws, FakeContext, http_event, record_from_message, sqs_event

pytestmark = pytest.mark.slow


def call(method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    response = api.lambda_handler(http_event(method, path, **kwargs), FakeContext().lambda_context)
    return int(response["statusCode"]), json.loads(response["body"] or "null")


def test_warm_api_requests_share_one_loop_and_one_set_of_clients(aws: Aws) -> None:
    runtime = warm_runtime()
    assert call("POST", "/threads", body={"thread_id": "t1"})[0] == 201
    first = runtime.run(runtime.services(aws_settings()))
    assert call("GET", "/threads/t1")[0] == 200
    assert call("POST", "/threads/t1/runs", body={"message": "hi", "run_id": "r1"})[0] == 202
    again = runtime.run(runtime.services(aws_settings()))
    assert (again.dynamodb, again.s3, again.sqs) == (first.dynamodb, first.s3, first.sqs)
    assert runtime.opened == 1


def test_a_second_worker_invocation_reuses_the_clients(aws: Aws) -> None:
    runtime = warm_runtime()
    handler = make_handler(provider_factory=lambda: ContinuingModel(chunk=40, delay=0.0))
    for run_id in ("r1", "r2"):
        call("POST", "/threads", body={"thread_id": f"t-{run_id}"})
        call("POST", f"/threads/t-{run_id}/runs", body={"message": "hi", "run_id": run_id})
        [message] = aws.receive()
        event = sqs_event(record_from_message(message, aws))
        assert handler(event, FakeContext().lambda_context) == {"batchItemFailures": []}
        aws.delete(message)
        assert call("GET", f"/runs/{run_id}")[1]["status"] == "completed"
    assert runtime.opened == 1


def test_the_configured_provider_is_built_once_with_a_bedrock_client_on_the_loop(
    aws: Aws,
) -> None:
    runtime = warm_runtime()
    settings = ProviderSettings(provider="bedrock", model="m", region="us-east-1")
    first = runtime.run(runtime.provider(settings))
    assert runtime.run(runtime.provider(settings)) is first
    client = first._client  # type: ignore[attr-defined]
    # It streams on a client of the process, and on a new connection each time: a pooled one
    # that died while the container was frozen would cost the turn an interruption.
    assert client.meta.config.connector_args["force_close"] is True
    other = runtime.run(runtime.provider(settings.model_copy(update={"idle_timeout": 5.0})))
    assert other is not first


def test_a_keyed_provider_is_rebuilt_once_its_key_may_have_rotated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    now = [0.0]
    runtime = WarmRuntime(clock=lambda: now[0])
    settings = ProviderSettings(provider="anthropic", model="m", api_key_max_age=300)
    try:
        first = runtime.run(runtime.provider(settings))
        now[0] = 300.0
        assert runtime.run(runtime.provider(settings)) is first
        now[0] = 301.0
        assert runtime.run(runtime.provider(settings)) is not first
    finally:
        runtime.reset()


def test_an_error_that_poisons_a_client_gets_the_clients_reopened(aws: Aws) -> None:
    broken: list[str] = []

    def closed_session(**_: Any) -> None:
        if not broken:
            broken.append("once")
            raise RuntimeError("Session is closed")  # what aiohttp says of a dead client

    hooks = shared_session()._session
    hooks.register("before-send.dynamodb.GetItem", closed_session)
    runtime = warm_runtime()
    runtime.reset()
    try:
        assert call("POST", "/threads", body={"thread_id": "t1"})[0] == 201
        before = runtime.run(runtime.services(aws_settings())).dynamodb
        assert call("GET", "/threads/t1")[0] == 500
        assert call("GET", "/threads/t1")[0] == 200
        after = runtime.run(runtime.services(aws_settings())).dynamodb
    finally:
        hooks.unregister("before-send.dynamodb.GetItem", closed_session)
    assert after is not before
    assert runtime.opened == 2


def test_an_answer_from_aws_does_not_reopen_the_clients(aws: Aws) -> None:
    runtime = warm_runtime()
    assert call("GET", "/threads/missing")[0] == 404
    assert call("GET", "/runs/missing")[0] == 404
    assert runtime.opened == 1


def test_a_task_an_invocation_left_behind_never_runs_in_the_next(aws: Aws) -> None:
    runtime = warm_runtime()
    woke: list[str] = []

    async def forever() -> None:
        await asyncio.Event().wait()
        woke.append("after its invocation")

    async def invocation() -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(forever())

    left = runtime.run(invocation())
    assert left.cancelled()
    runtime.run(asyncio.sleep(0))
    assert woke == []


def test_threads_of_one_process_take_turns_on_the_loop(aws: Aws) -> None:
    """awaken-s3 dev calls the API handler from a pool of request threads."""
    call("POST", "/threads", body={"thread_id": "t1"})
    with ThreadPoolExecutor(max_workers=4) as pool:
        statuses = list(pool.map(lambda _: call("GET", "/threads/t1")[0], range(12)))
    assert statuses == [200] * 12
    assert warm_runtime().opened == 1


# -- connections that died while the process was frozen


class DroppingProxy:
    """A TCP proxy on 127.0.0.1 whose open connections can be killed between requests: with
    a close the client sees (FIN), or silently (the next request is read and never answered,
    the connection then closed)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._silenced: set[int] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self._lock:
                self.accepted += 1
                self._pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, upstream: bool) -> None:
        try:
            while data := source.recv(65536):
                if upstream and id(source) in self._silenced:
                    break  # a request on a connection that died: never answered
                target.sendall(data)
        except OSError:
            pass
        for sock in (source, target):
            sock.close()

    def close_connections(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, server in pairs:
            for sock in (client, server):
                with contextlib.suppress(OSError):  # its pump may have closed it already
                    sock.shutdown(socket.SHUT_RDWR)

    def silence_connections(self) -> None:
        with self._lock:
            self._silenced.update(id(client) for client, _ in self._pairs)
            self._pairs = []

    def stop(self) -> None:
        self.listener.close()
        self.close_connections()


class _KeepAliveDynamo(BaseHTTPRequestHandler):
    """Answers every DynamoDB request with an empty JSON object, keeping the connection open
    (moto closes every connection after one answer, so nothing would ever be pooled)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[DroppingProxy]:
    stub = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveDynamo)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    running = DroppingProxy(("127.0.0.1", stub.server_address[1]))
    monkeypatch.setenv("AWS_ENDPOINT_URL", running.url)
    yield running
    running.stop()
    stub.shutdown()
    stub.server_close()


@pytest.fixture
def attempts() -> Iterator[list[str]]:
    sent: list[str] = []

    def count(**kwargs: Any) -> None:
        sent.append(str(kwargs["event_name"]).split(".")[2])

    hooks = shared_session()._session
    hooks.register("before-send.dynamodb", count)
    warm_runtime().reset()
    yield sent
    hooks.unregister("before-send.dynamodb", count)
    warm_runtime().reset()


def read_run() -> None:
    runtime = warm_runtime()

    async def read() -> None:
        services = await runtime.services(StorageSettings(bucket="b", table="t", queue_url="q"))
        await services.threads.get_run("r1")

    runtime.run(read())


@pytest.mark.parametrize("death", ["closed", "silent"])
def test_a_pooled_connection_that_died_meanwhile_is_retried_not_fatal(
    proxy: DroppingProxy, attempts: list[str], death: str
) -> None:
    with pytest.raises(RunNotFound):  # an answer: the stub knows no run
        read_run()
    assert proxy.accepted == 1
    # What a frozen container's pool may hold when it thaws: connections the peer closed,
    # or ones that died without a word (the next request on them is never answered).
    if death == "closed":
        proxy.close_connections()
    else:
        proxy.silence_connections()
    attempts.clear()
    with pytest.raises(RunNotFound):  # answered again: the dead connection cost no error
        read_run()
    if death == "silent":
        # The lost attempt, then the same request on a new connection.
        assert attempts == ["GetItem", "GetItem"]
    assert proxy.accepted == 2
    assert warm_runtime().opened == 1


@pytest.mark.parametrize(
    ("error", "poisoned"),
    [
        (EndpointConnectionError(endpoint_url="http://x"), True),
        (ServerDisconnectedError(), True),
        (ConnectionResetError(), True),
        (RuntimeError("Session is closed"), True),
        (StoreUnavailable("no answer"), False),
        (ClientError({"Error": {"Code": "ConditionalCheckFailedException"}}, "PutItem"), False),
        (RunNotFound("r1"), False),
        (ValueError("a bug"), False),
        (RecursionError(), False),
    ],
)
def test_only_a_failure_without_an_answer_poisons_the_clients(
    error: BaseException, poisoned: bool
) -> None:
    assert poisons(error) is poisoned


def test_a_store_error_caused_by_a_lost_connection_poisons_the_clients() -> None:
    try:
        try:
            raise EndpointConnectionError(endpoint_url="http://x")
        except EndpointConnectionError as exc:
            raise StoreUnavailable("DynamoDB did not answer") from exc
    except StoreUnavailable as exc:
        assert poisons(exc)


def aws_settings() -> Any:
    from awaken_s3.settings import StorageSettings

    return StorageSettings.from_env(need_queue=True)
