"""A user's own agent, run as a user runs it: an app module outside this package, served by the
installed ``awaken-s3 dev --app``, driven over HTTP with a real client, its model a local
OpenAI-compatible server speaking the real wire format.

The model calls the app's three tools in one turn. Two of them record what their ToolContext
told them, show that they overlap (each waits for the other to have started: run one after
the other, neither could finish), and hold until the test lets them go; the third finishes at
once. The worker is killed while the two run and after the third finished. The run then
completes with each call run at most once: the idempotent tool again (attempt 2, the same
idempotency key), the non-idempotent one never again (its outcome is reported unknown), and
the finished one answered from its record.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.runtime.tools import OUTCOME_UNKNOWN
from tests.dev.conftest import DevServer, eventually
from tests.providers.wire import openai_wire as oa
from tests.providers.wire.server import WireServer

pytestmark = pytest.mark.slow

APP_MODULE = '''
"""A support desk: what a user of awaken-s3 writes in their own project."""

import json
import os
import time
from pathlib import Path

from awaken_s3 import Agent, App, ToolContext, tool

RECORDS = Path(os.environ["SUPPORT_RECORDS"])


def note(**fields):
    with (RECORDS / "calls.jsonl").open("a") as f:
        f.write(json.dumps(fields) + "\\n")


def hold(me, other):
    # Both calls must be running at once for either to pass (bounded: a sequential run
    # records "alone" instead of hanging), then both wait for the test's go.
    (RECORDS / f"started-{me}").touch()
    together = False
    for _ in range(1200):
        if (RECORDS / f"started-{other}").exists():
            together = True
            break
        time.sleep(0.05)
    while not (RECORDS / "go").exists():
        time.sleep(0.05)
    return together


@tool(idempotent=True)
def lookup_order(order_id: str, ctx: ToolContext) -> dict:
    """Find an order by its id.

    Args:
        order_id: The order's id, as the customer wrote it.
    """
    note(tool="lookup_order", event="start", run_id=ctx.run_id, thread_id=ctx.thread_id,
         tool_call_id=ctx.tool_call_id, key=ctx.idempotency_key, attempt=ctx.attempt,
         caller=ctx.caller, seconds_left=ctx.seconds_left)
    ctx.logger.info("looking the order up", extra={"order_id": order_id})
    together = hold("lookup_order", "send_notice")
    note(tool="lookup_order", event="end", together=together)
    return {"order_id": order_id, "status": "shipped"}


@tool
def send_notice(to: str, text: str, urgent: bool = False) -> str:
    """Email a customer (not safe to repeat)."""
    note(tool="send_notice", event="start")
    together = hold("send_notice", "lookup_order")
    note(tool="send_notice", event="end", together=together)
    return f"sent to {to}"


@tool
def open_ticket(subject: str) -> str:
    """Open a support ticket (not safe to repeat; done at once)."""
    note(tool="open_ticket", event="start")
    return "ticket T-1 opened"


app = App([
    Agent("support", description="Answers customers about their orders.",
          system="You are the support desk.", tools=[lookup_order, send_notice, open_ticket]),
    Agent("chat", description="Small talk, no tools."),
])
'''

TOOL_TURN = oa.stream(
    oa.role(),
    oa.text("Let me check the order and tell the customer."),
    oa.tool_start(0, "call_lookup", "lookup_order"),
    oa.tool_args(0, '{"order_id": '),
    oa.tool_args(0, '"A-17"}'),
    oa.tool_start(1, "call_notice", "send_notice"),
    oa.tool_args(1, '{"to": "bo@example.com", '),
    oa.tool_args(1, '"text": "Your order shipped."}'),
    oa.tool_start(2, "call_ticket", "open_ticket"),
    oa.tool_args(2, '{"subject": "A-17"}'),
    oa.finish("tool_calls"),
    oa.usage(120, 40),
    oa.DONE,
)
ANSWER = "Order A-17 has shipped; the customer was told."
ANSWER_TURN = oa.stream(
    oa.role(),
    oa.text("Order A-17 has shipped; "),
    oa.text("the customer was told."),
    oa.finish("stop"),
    oa.usage(200, 12),
    oa.DONE,
)


@pytest.fixture
def wire() -> Iterator[WireServer]:
    """The OpenAI-compatible server, on its own event loop in a thread."""
    server = WireServer()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=30)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)


def calls(records: Path) -> list[dict[str, Any]]:
    path = records / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_a_user_s_app_runs_its_tools_concurrently_and_survives_a_kill_during_them(
    tmp_path: Path, wire: WireServer, dev_server_factory: Callable[..., DevServer]
) -> None:
    project, records = tmp_path / "project", tmp_path / "records"
    project.mkdir()
    records.mkdir()
    (project / "support_agents.py").write_text(textwrap.dedent(APP_MODULE))
    wire.push(TOOL_TURN, ANSWER_TURN)
    awaken = str(Path(sys.executable).with_name("awaken-s3"))
    server = dev_server_factory(
        "--app",
        "support_agents:app",
        "--provider",
        "openai",
        # Long enough that a loaded machine does not take the first worker's lease from it
        # while its tools run (the kill, not a stall, is what this test is about).
        "--lease-seconds",
        "8",
        "--sweep-interval",
        "0",
        command=[awaken],
        cwd=project,
        env={
            "SUPPORT_RECORDS": str(records),
            "AWAKEN_OPENAI_BASE_URL": wire.url + "/v1",
            "OPENAI_API_KEY": "sk-test-not-a-real-key",
            "AWAKEN_MODEL": "gpt-4.1",
            # The app module is found from the project directory, not from this checkout.
            "PYTHONPATH": "",
        },
    )
    assert "app          support_agents:app: agents support, chat" in server.banner()
    with server.client() as http:
        agents = http.get("/agents").json()["agents"]
        assert [a["name"] for a in agents] == ["support", "chat"]
        support = agents[0]
        assert support["model"] == "gpt-4.1"
        lookup_schema = support["tools"][0]["input_schema"]
        assert lookup_schema["properties"]["order_id"] == {
            "type": "string",
            "description": "The order's id, as the customer wrote it.",
        }

        assert http.post("/threads", json={"thread_id": "t1"}).status_code == 201
        started = http.post(
            "/threads/t1/runs",
            json={
                "message": "Where is order A-17? Tell the customer.",
                "run_id": "r1",
                "agent": "support",
            },
        )
        assert started.status_code == 202, started.text

        # Both calls are running at once: kill the worker while they are.
        eventually(
            lambda: (
                (records / "started-lookup_order").exists()
                and (records / "started-send_notice").exists()
            ),
            what="both tools to start",
        )
        killed = http.post("/dev/runs/r1/kill")
        assert killed.status_code == 200, killed.text
        (records / "go").touch()

        def ended() -> bool:
            return http.get("/runs/r1").json()["status"] in ("completed", "failed")

        eventually(ended, what="the run to end")
        run = http.get("/runs/r1").json()
        assert run["status"] == "completed", run
        thread = http.get("/threads/t1").json()

    # The request the model server received carries the schemas derived from the type hints.
    first = wire.received[0].json()
    assert first["model"] == "gpt-4.1"
    assert first["messages"][0] == {"role": "system", "content": "You are the support desk."}
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert offered["lookup_order"]["description"] == "Find an order by its id."
    notice = offered["send_notice"]["parameters"]
    assert notice["required"] == ["to", "text"]
    assert notice["properties"]["urgent"] == {"type": "boolean", "default": False}
    assert "ctx" not in offered["lookup_order"]["parameters"]["properties"]

    # Each call at most once: the idempotent lookup ran again after the kill, as attempt 2
    # with the same idempotency key; the notice never ran again.
    log = calls(records)
    starts = [c for c in log if c["event"] == "start"]
    assert [c["tool"] for c in starts].count("send_notice") == 1
    # The call that finished before the kill is answered from its record, never run again.
    assert [c["tool"] for c in starts].count("open_ticket") == 1
    lookups = [c for c in starts if c["tool"] == "lookup_order"]
    assert [c["attempt"] for c in lookups] == [1, 2]
    assert lookups[0]["key"] == lookups[1]["key"] and lookups[0]["key"].startswith("awaken-")
    assert {(c["run_id"], c["thread_id"], c["tool_call_id"], c["caller"]) for c in lookups} == {
        ("r1", "t1", "call_lookup", "dev-user")
    }
    assert all(0 < c["seconds_left"] <= 120 for c in lookups)
    # The two first attempts overlapped (each saw the other start).
    assert all(c["together"] for c in log if c["event"] == "end")

    # The thread: the question, the tool-use turn, both results (the notice's: unknown), the
    # answer; the model was told the results in the model's order.
    roles = [m["role"] for m in thread["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]
    results = thread["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == ["call_lookup", "call_notice", "call_ticket"]
    assert json.loads(results[0]["content"]) == {"order_id": "A-17", "status": "shipped"}
    assert (results[1]["content"], results[1]["is_error"]) == (OUTCOME_UNKNOWN, True)
    assert (results[2]["content"], results[2]["is_error"]) == ("ticket T-1 opened", False)
    assert thread["messages"][3]["content"][0]["text"] == ANSWER
    second = wire.received[1].json()
    assert [m["role"] for m in second["messages"]][-3:] == ["tool", "tool", "tool"]


RELOADED_MODULE = """
from awaken_s3 import Agent, App

app = App([Agent("{name}", description="{description}")])
"""


def test_reload_reimports_the_app_and_the_run_in_flight_resumes_from_its_checkpoint(
    tmp_path: Path, dev_server_factory: Callable[..., DevServer]
) -> None:
    from awaken_s3.demo.model import ANSWER as PARAGRAPH

    project = tmp_path / "project"
    project.mkdir()
    module = project / "desk.py"
    module.write_text(RELOADED_MODULE.format(name="first", description="Before the edit."))
    server = dev_server_factory(
        "--app",
        "desk:app",
        "--reload",
        # Slow enough (about 25 s for the paragraph) that the edit lands mid-turn on any
        # machine: the reload waits for no more than the file watcher's debounce.
        "--scripted-delay",
        "0.12",
        "--lease-seconds",
        "3",
        "--sweep-interval",
        "0",
        command=[str(Path(sys.executable).with_name("awaken-s3"))],
        cwd=project,
        env={"PYTHONPATH": ""},
    )
    with server.client() as http:
        assert [a["name"] for a in http.get("/agents").json()["agents"]] == ["first"]
        http.post("/threads", json={"thread_id": "t1"})
        assert (
            http.post("/threads/t1/runs", json={"message": "hi", "run_id": "r1"}).status_code == 202
        )

        def streaming() -> bool:
            partial = http.get("/runs/r1/partial").json()["partial"]
            return partial is not None and len(partial["text"]) > 40

        eventually(streaming, what="the run to stream")
        # The user edits their module: the app is re-imported, the workers restarted.
        module.write_text(RELOADED_MODULE.format(name="first", description="After the edit."))
        eventually(
            lambda: http.get("/agents").json()["agents"][0]["description"] == "After the edit.",
            what="the API to serve the edited app",
        )
        eventually(
            lambda: http.get("/runs/r1").json()["status"] == "completed",
            what="the run to complete",
        )
        [_, answer] = http.get("/threads/t1").json()["messages"]
        internals = http.get("/dev/runs/r1").json()
    # The worker in flight was killed by the reload; the next one resumed the turn from its
    # checkpoint, and the committed turn is whole, once.
    assert answer["content"] == [{"type": "text", "text": PARAGRAPH}]
    assert "killed" in [i["outcome"] for i in internals["invocations"]]
    assert "R1" in [w["resumed_with"] for w in internals["writers"]]
    assert "reloaded desk:app; restarted" in server.banner()
