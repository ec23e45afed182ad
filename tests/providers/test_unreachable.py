"""An endpoint no connection reaches fails the run with ``provider_unreachable``, naming the
URL and the cause, after a few retries: never as ``retry_budget_exhausted``.

Each adapter runs with its real SDK against a port on 127.0.0.1 that refuses connections (a
socket bound and never listening: the kernel answers every connect with a reset, and no
other process can take the port meanwhile), through the run loop and the real TurnRunner.
The retries' backoff moves a fake clock (the streaming tests' RecordingSleep): nothing sleeps.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from types import ModuleType
from typing import Any
from urllib.parse import quote

import anthropic
import httpx2
import openai
import pytest
from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError

from awaken_s3.providers.anthropic import map_anthropic_exception
from awaken_s3.providers.bedrock import map_bedrock_exception
from awaken_s3.providers.openai import OpenAIChatProvider, map_openai_exception
from awaken_s3.providers.unreachable import safe_url
from awaken_s3.runtime.loop import RunEnd, RunLoop
from awaken_s3.service.public_errors import public_error
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.errors import ConnectionDropped, ProviderUnreachable, StreamStalled
from awaken_s3.streaming.provider import Provider
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads import InMemoryThreadStore, RunSettings, RunState, RunStatus
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import seed_run
from tests.providers.wire.dialects import DIALECTS, Dialect
from tests.providers.wire.server import WireServer
from tests.streaming.conftest import RecordingSleep

SECRET = "sk-in-the-query-9d1e"
#: the path each SDK posts a streaming turn to (Bedrock's names the model)
PATHS = {
    "anthropic": "/v1/messages",
    "openai": "/v1/chat/completions",
    "bedrock": "/model/{model}/converse-stream",
}


@pytest.fixture
def refused_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: every connect is refused
        yield int(sock.getsockname()[1])


async def run_against(
    provider: Provider, model: str, policy: RetryPolicy
) -> tuple[RunState, list[float], RunEnd]:
    clock = FakeClock()
    threads = InMemoryThreadStore(clock=clock)
    checkpoints = InMemoryStreamCheckpointStore()
    await seed_run(threads, prompt="hello?", settings=RunSettings(model=model))
    sleep = RecordingSleep(clock)
    runner = TurnRunner(
        provider, checkpoints, writer_id="w1", retry_policy=policy, clock=clock, sleep=sleep
    )
    loop = RunLoop(threads, runner, checkpoints, worker_id="w1", clock=clock, monotonic=clock)
    try:
        result = await loop.run("r1")
    finally:
        close = getattr(provider, "aclose", None)
        if close is not None:
            await close()
    return await threads.get_run("r1"), sleep.delays, result.end


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
async def test_a_refused_endpoint_fails_the_run_naming_the_url_and_the_cause(
    d: Dialect, refused_port: int
) -> None:
    base = f"http://127.0.0.1:{refused_port}"
    policy = RetryPolicy()  # the worker's defaults: 5 interruptions, 2 of them unreachable
    run, delays, end = await run_against(d.build(base), d.model, policy)

    url = base + PATHS[d.name].format(model=quote(d.model, safe=""))
    assert end == RunEnd.FAILED and run.status == RunStatus.FAILED
    assert run.error is not None
    assert (run.error.code, run.error.message) == (
        "provider_unreachable",
        f"cannot connect to {url}: connection refused",
    )
    assert not run.error.retryable
    # Retried a little (a provider restarting), then failed fast: fewer attempts than the
    # interruption budget, and the backoff stays within its first two steps (1 s + 2 s).
    assert len(delays) == policy.max_unreachable == 2 < policy.max_interruptions
    assert sum(delays) <= 3.0
    # The caller reads a fixed sentence; the URL stays in the table and the worker's log.
    assert public_error(run.error) == {
        "code": "provider_unreachable",
        "message": "the service could not connect to the model provider",
    }


async def test_a_key_in_the_url_never_reaches_the_stored_error(refused_port: int) -> None:
    # An Azure-style gateway takes its key in the query; user info may hold a password.
    client = openai.AsyncOpenAI(
        api_key="unused",
        base_url=f"http://user:{SECRET}@127.0.0.1:{refused_port}/v1",
        default_query={"api-key": SECRET},
        max_retries=0,
    )
    provider = OpenAIChatProvider(client=client, max_tokens_param="max_tokens")
    try:
        run, _, _ = await run_against(provider, "gpt-test", RetryPolicy(max_unreachable=0))
    finally:
        await client.close()
    assert run.error is not None and run.error.code == "provider_unreachable"
    assert SECRET not in run.error.message and "user" not in run.error.message
    assert run.error.message == (
        f"cannot connect to http://127.0.0.1:{refused_port}/v1/chat/completions: connection refused"
    )


async def test_without_unreachable_retries_the_first_refusal_fails_the_run(
    refused_port: int,
) -> None:
    d = DIALECTS[0]
    run, delays, _ = await run_against(
        d.build(f"http://127.0.0.1:{refused_port}"), d.model, RetryPolicy(max_unreachable=0)
    )
    assert delays == [] and run.error is not None and run.error.code == "provider_unreachable"


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
async def test_a_failed_tls_handshake_is_unreachable_too(d: Dialect, wire: WireServer) -> None:
    # https:// to a server that speaks plain HTTP: the handshake fails, no request is sent.
    provider = d.build(wire.url.replace("http://", "https://"))
    run, _, _ = await run_against(provider, d.model, RetryPolicy(max_unreachable=0))
    assert run.error is not None and run.error.code == "provider_unreachable"
    assert run.error.message.startswith("cannot connect to https://127.0.0.1:")
    assert run.error.message.endswith(": the TLS handshake failed (WRONG_VERSION_NUMBER)")
    assert wire.received == []


# -- the exception chains the SDKs raise for the failures no local port can stage --------


def _sdk_error(sdk: ModuleType, cause: BaseException, *, timeout: bool = False) -> Any:
    """What the SDK's client raises: its error, from httpx's, for the request it tried."""
    request = httpx2.Request("POST", f"https://api.example.com/v1/chat/completions?key={SECRET}")
    error = sdk.APITimeoutError(request) if timeout else sdk.APIConnectionError(request=request)
    error.__cause__ = cause
    return error


def _connect_error(message: str, cause: BaseException) -> httpx2.ConnectError:
    error = httpx2.ConnectError(message)
    error.__cause__ = cause
    return error


def _untrusted() -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    error.verify_message = "self-signed certificate"
    return error


MAPPERS = [(openai, map_openai_exception), (anthropic, map_anthropic_exception)]


@pytest.mark.parametrize(("sdk", "mapper"), MAPPERS, ids=["openai", "anthropic"])
@pytest.mark.parametrize(
    ("cause", "timeout", "said"),
    [
        (
            _connect_error("no name", socket.gaierror(-2, "Name or service not known")),
            False,
            "the host name did not resolve (Name or service not known)",
        ),
        (httpx2.ConnectTimeout("timed out"), True, "no connection within the connect timeout"),
        (
            _connect_error("certificate verify failed", _untrusted()),
            False,
            "the TLS certificate was refused (self-signed certificate)",
        ),
    ],
    ids=["dns", "connect-timeout", "certificate"],
)
def test_the_http_sdks_name_each_cause(
    sdk: ModuleType, mapper: Any, cause: BaseException, timeout: bool, said: str
) -> None:
    mapped = mapper(_sdk_error(sdk, cause, timeout=timeout), sent_prefill=False)
    assert isinstance(mapped, ProviderUnreachable), mapped
    url = "https://api.example.com/v1/chat/completions"
    assert (str(mapped), mapped.url) == (f"cannot connect to {url}: {said}", url)


def test_a_connection_lost_after_it_was_made_stays_a_drop_and_a_read_timeout_a_stall() -> None:
    request = httpx2.Request("POST", "https://api.example.com/v1/messages")
    lost = openai.APIConnectionError(request=request)
    lost.__cause__ = httpx2.RemoteProtocolError("peer closed connection")
    stalled = openai.APITimeoutError(request)
    stalled.__cause__ = httpx2.ReadTimeout("timed out")
    assert isinstance(map_openai_exception(lost, sent_prefill=False), ConnectionDropped)
    assert isinstance(map_openai_exception(stalled, sent_prefill=False), StreamStalled)


def test_bedrock_names_a_connect_timeout_and_keeps_a_broken_connection_a_drop() -> None:
    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse-stream"
    timeout = map_bedrock_exception(
        ConnectTimeoutError(endpoint_url=url, error=TimeoutError()), sent_prefill=False
    )
    assert isinstance(timeout, ProviderUnreachable)
    assert str(timeout) == f"cannot connect to {url}: no connection within the connect timeout"
    # aiobotocore raises the same class for a connection that broke after it was made.
    broken = EndpointConnectionError(endpoint_url=url, error=ConnectionResetError(104, "reset"))
    assert isinstance(map_bedrock_exception(broken, sent_prefill=False), ConnectionDropped)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:9/v1/chat/completions", "http://127.0.0.1:9/v1/chat/completions"),
        (f"https://u:{SECRET}@gw.example/v1/x?api-key={SECRET}#f", "https://gw.example/v1/x"),
        ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),
    ],
)
def test_safe_url_drops_user_info_query_and_fragment(url: str, shown: str) -> None:
    assert safe_url(url) == shown
