"""SIGKILL a worker while its MCP call is in flight (the server has the call, the ledger has
the claim and no result), then let another worker finish the run: a tool the server does not
annotate idempotent is never called twice (counted on the server), one it does is called
again with the same idempotency key."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from awaken_s3.local.moto import MotoServer
from awaken_s3.messages import ToolResultBlock
from awaken_s3.runtime.tool_context import idempotency_key
from awaken_s3.runtime.tools import OUTCOME_UNKNOWN
from awaken_s3.threads import RunStatus
from tests.fixtures.processes import sigkill_when_reached
from tests.mcp.conftest import ROOT
from tests.mcp.counting_server import calls
from tests.mcp.worker_proc import McpWorker, config_json, seeded, work
from tests.runtime.aws import final_state

pytestmark = pytest.mark.slow


def run_until_called_then_kill(config: McpWorker, records: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp.worker_proc", config_json(config)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    sigkill_when_reached(proc, lambda: bool(calls(records)), what="called the server", bound=120)


@pytest.mark.parametrize("tool", ["send_note", "set_flag"])
def test_a_worker_killed_mid_call(
    moto_server: MotoServer, counting: tuple[str, Path], tool: str
) -> None:
    url, records = counting
    target = asyncio.run(seeded(moto_server.endpoint_url))
    config = McpWorker(
        target.endpoint_url, target.table, target.bucket, url=url, tool=tool, worker="doomed"
    )
    run_until_called_then_kill(config, records)
    assert len(calls(records)) == 1  # the server has the call; the worker is dead

    ends = asyncio.run(work(dataclasses.replace(config, worker="rescuer")))
    run, messages, checkpoint = asyncio.run(final_state(target))
    assert ends["completed"] == 1 and run.status == RunStatus.COMPLETED and checkpoint is None
    [result] = [b for m in messages for b in m.content if isinstance(b, ToolResultBlock)]
    made = calls(records)
    key = idempotency_key("r1", "call-0", 1)  # run.turn once the calling turn committed
    if tool == "send_note":  # no annotation: at most once
        assert len(made) == 1
        assert (result.content, result.is_error) == (OUTCOME_UNKNOWN, True)
    else:  # idempotentHint: sent again, with the same key for the server to deduplicate by
        assert [c["key"] for c in made] == [key, key]
        assert (result.content, result.is_error) == ("set_flag did hang", False)
