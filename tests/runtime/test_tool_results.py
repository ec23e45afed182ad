"""What a tool returns that JSON (or UTF-8) cannot hold becomes an error result with a fixed
sentence: never the object's ``repr`` (it may hold a secret), never an empty success. Run
through the run loop on memory and on DynamoDB (moto)."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from awaken_s3 import Agent, App, tool
from awaken_s3.messages import ToolResultBlock
from awaken_s3.runtime import tools as tools_module
from awaken_s3.runtime.loop import RunEnd
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import SETTINGS, seed_run
from tests.runtime.conftest import Backend
from tests.runtime.scripts import TurnAwareProvider, TurnSpec
from tests.runtime.test_agent_runs import app_loop


class Credentials:
    """Not JSON: its repr is all a careless fallback would have."""

    def __repr__(self) -> str:
        return "Credentials(user=bo, secret=hunter2)"

    __str__ = __repr__


@tool
def fetch_credentials() -> Credentials:
    """Return an object JSON cannot hold."""
    return Credentials()


@tool
def broken_text() -> str:
    """Return text with a lone surrogate (no UTF-8 encoding of it exists)."""
    return "half of a pair: \ud800 and the rest"


@tool
def nested_object() -> dict[str, object]:
    """Return JSON-able data with an object JSON cannot hold inside."""
    return {"ok": True, "creds": Credentials()}


AGENT = Agent("results", tools=[fetch_credentials, broken_text, nested_object])


@pytest.mark.parametrize("name", ["fetch_credentials", "broken_text", "nested_object"])
async def test_a_result_json_cannot_hold_is_an_error_result_without_its_value(
    backend: Backend, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TurnAwareProvider([TurnSpec("Fetching.", (("c1", name, {}),)), TurnSpec("Done.")])
    settings = dataclasses.replace(SETTINGS, agent=AGENT.name, tools=AGENT.tool_names)
    await seed_run(backend.threads, settings=settings)
    loop = app_loop(backend.threads, backend.checkpoints, provider, App([AGENT]), FakeClock())
    with caplog.at_level(logging.DEBUG):
        result = await loop.run("r1")
    assert result.end == RunEnd.COMPLETED

    messages = await backend.threads.load_messages("t1")
    [block] = [b for m in messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert (block.content, block.is_error) == (tools_module.unserialisable(name), True)
    stored = "".join(m.model_dump_json() for m in messages)
    assert "hunter2" not in stored and "half of a pair" not in stored
    # The log says which type it was, never the value.
    assert "hunter2" not in caplog.text and "half of a pair" not in caplog.text
    assert any(
        name in r.getMessage() and "could not be serialised" in r.getMessage()
        for r in caplog.records
    )
