"""SIGKILL a worker process at the two dangerous instants, then let another worker finish.

* between the turn commit and the checkpoint delete: the checkpoint left behind is stale;
  the next worker deletes it and never replays it;
* between a tool call's claim and its result: the next worker answers the call with the
  unknown-outcome error (non-idempotent tool) or runs it again (idempotent tool).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from awaken_s3.local.moto import MotoServer
from awaken_s3.messages import ToolResultBlock
from awaken_s3.runtime.tools import OUTCOME_UNKNOWN
from awaken_s3.threads import RunStatus
from tests.fixtures.aws import AwsTarget
from tests.fixtures.processes import sigkill_when_reached
from tests.runtime.aws import PROMPT, check_thread, final_state, seeded_target
from tests.runtime.scripts import Effects, expected_thread, tool_turns
from tests.runtime.worker_proc import WorkerConfig, config_json, work

ROOT = Path(__file__).resolve().parents[2]
TURNS = 2

pytestmark = pytest.mark.slow


def config(target: AwsTarget, tmp: Path, worker: str, **kw: object) -> WorkerConfig:
    return WorkerConfig(
        endpoint=target.endpoint_url,
        table=target.table,
        bucket=target.bucket,
        run_id="r1",
        worker=worker,
        effects_path=str(tmp / "effects"),
        marker=str(tmp / "marker"),
        tool_turns=TURNS,
        lease_seconds=1.0,
        **kw,  # type: ignore[arg-type]
    )


def run_until_marker_then_kill(cfg: WorkerConfig) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.runtime.worker_proc", config_json(cfg)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    sigkill_when_reached(
        proc, lambda: Path(cfg.marker).exists(), what="reached the kill point", bound=60
    )


def rescue(target: AwsTarget, tmp: Path) -> Counter[str]:
    """Another worker (this process) picks the run up once the dead one's lease expires."""
    return asyncio.run(work(config(target, tmp, "rescuer")))


def test_kill_between_commit_and_checkpoint_delete(moto_server: MotoServer, tmp_path: Path) -> None:
    target = asyncio.run(seeded_target(moto_server.endpoint_url))
    run_until_marker_then_kill(config(target, tmp_path, "doomed", mode="hang_on_delete"))
    run, messages, checkpoint = asyncio.run(final_state(target))
    assert run.turn == 1 and len(messages) == 2  # turn 0 committed ...
    assert checkpoint is not None and checkpoint.checkpoint.turn == 0  # ... checkpoint left

    ends = rescue(target, tmp_path)
    run, messages, checkpoint = asyncio.run(final_state(target))
    assert ends["completed"] == 1 and run.status == RunStatus.COMPLETED
    assert checkpoint is None
    # Turn 0 appears once: the stale checkpoint (a complete tool-use turn, which R2 would
    # have synthesised again) was not replayed.
    counts = check_thread(messages, Effects(str(tmp_path / "effects")).all(), TURNS)
    assert counts == Counter({"add:0": 1, "add:1": 1})


@pytest.mark.parametrize("idempotent", [False, True])
def test_kill_between_tool_claim_and_result(
    moto_server: MotoServer, tmp_path: Path, idempotent: bool
) -> None:
    target = asyncio.run(seeded_target(moto_server.endpoint_url))
    run_until_marker_then_kill(
        config(target, tmp_path, "doomed", mode="hang_in_tool", idempotent=idempotent)
    )
    assert Effects(str(tmp_path / "effects")).all() == ["add:0"]  # the side effect happened

    asyncio.run(work(config(target, tmp_path, "rescuer", idempotent=idempotent)))
    run, messages, _ = asyncio.run(final_state(target))
    assert run.status == RunStatus.COMPLETED
    first_result = messages[2].content[0]
    assert isinstance(first_result, ToolResultBlock)
    effects = Counter(Effects(str(tmp_path / "effects")).all())
    if idempotent:
        assert (first_result.content, first_result.is_error) == ("1", False)
        assert effects == Counter({"add:0": 2, "add:1": 1})  # re-run: at least once, no loss
    else:
        assert (first_result.content, first_result.is_error) == (OUTCOME_UNKNOWN, True)
        assert effects == Counter({"add:0": 1, "add:1": 1})  # never twice
    results = [first_result.content, "2"]
    assert messages == expected_thread(PROMPT, tool_turns(TURNS), results)
