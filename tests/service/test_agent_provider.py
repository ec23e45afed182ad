"""An agent with a provider of its own, in an environment configured for another: the run the
API creates carries that provider's model, ``GET /agents`` shows it, and the worker streams
the run from that provider with it (the real API and worker handlers on moto, the Anthropic
SDK against a wire-level server on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from awaken_s3 import Agent, App
from awaken_s3.providers.config import DEFAULT_MODELS
from awaken_s3.service.wiring import warm_runtime
from tests.providers.wire import anthropic_wire as aw
from tests.providers.wire.server import WireServer
from tests.providers.wire.validation import anthropic_content_rules
from tests.service.conftest import (
    Aws,
    FakeContext,
    api_call,
    http_event,
    record_from_message,
    sqs_event,
)

pytestmark = pytest.mark.slow

#: seconds only a hung test waits
HUNG = 60.0
#: the environment's model: a Bedrock model id, which the Anthropic API would not know
BEDROCK_MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"

APP = App(
    [
        Agent("support", provider="anthropic", overridable={"model"}),
        Agent("plain"),
    ]
)


@contextmanager
def wire_server() -> Iterator[WireServer]:
    """A wire server on its own event loop and thread: the worker handler runs its own loop."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="wire-server", daemon=True)
    thread.start()
    server = WireServer()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=HUNG)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=HUNG)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=HUNG)
        loop.close()


@pytest.fixture
def bedrock_environment(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[WireServer]:
    with wire_server() as wire:
        monkeypatch.setenv("AWAKEN_PROVIDER", "bedrock")
        monkeypatch.setenv("AWAKEN_MODEL", BEDROCK_MODEL)
        monkeypatch.setenv("AWAKEN_ANTHROPIC_BASE_URL", wire.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-wire-test")
        monkeypatch.setenv("AWAKEN_ALLOWED_MODELS", "us.amazon.nova-pro-v1:0")
        warm_runtime().reset()
        try:
            yield wire
        finally:
            warm_runtime().reset()


def app_api(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    return api_call(APP.api_handler(), method, path, **kwargs)


def test_the_agent_s_provider_decides_the_model_the_api_stores_and_the_worker_sends(
    aws: Aws, bedrock_environment: WireServer
) -> None:
    wire = bedrock_environment
    wire.validate = anthropic_content_rules
    wire.push(
        aw.stream(aw.message_start(), aw.text_block(0, ["Hello from Claude."]), *aw.message_end())
    )
    anthropic_model = DEFAULT_MODELS["anthropic"]

    listed = {agent["name"]: agent["model"] for agent in app_api("GET", "/agents")["agents"]}
    assert listed == {"support": anthropic_model, "plain": BEDROCK_MODEL}

    thread = app_api("POST", "/threads")["thread_id"]
    run = app_api(
        "POST",
        f"/threads/{thread}/runs",
        body={"message": "Hi.", "run_id": "r1", "agent": "support"},
    )
    assert run["model"] == anthropic_model

    [message] = aws.receive()
    event = sqs_event(record_from_message(message, aws))
    response = APP.worker_handler()(event, FakeContext().lambda_context)
    assert response == {"batchItemFailures": []}
    [request] = wire.received
    assert request.path == "/v1/messages"
    assert request.json()["model"] == anthropic_model
    ended = app_api("GET", "/runs/r1")
    assert (ended["status"], ended["model"]) == ("completed", anthropic_model)
    answer = app_api("GET", f"/threads/{thread}")["messages"][-1]
    assert answer["content"] == [{"type": "text", "text": "Hello from Claude."}]


def test_the_environment_s_allowed_models_widen_only_the_agents_on_its_provider(
    aws: Aws, bedrock_environment: WireServer
) -> None:
    """``AWAKEN_ALLOWED_MODELS`` names Bedrock models: an Anthropic agent may not run one."""
    thread = app_api("POST", "/threads")["thread_id"]
    body = {"message": "Hi.", "agent": "support", "model": "us.amazon.nova-pro-v1:0"}
    event = http_event("POST", f"/threads/{thread}/runs", body=body)
    response = APP.api_handler()(event, FakeContext().lambda_context)
    assert response["statusCode"] == 422
    assert aws.receive() == []
