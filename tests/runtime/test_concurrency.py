"""Racing workers on one run: asyncio workers in one process, and OS processes.

Invariants only (no timing assertions): each turn committed exactly once, each tool run
exactly once (at most once when its outcome was reported unknown), the run completed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from awaken_s3.threads import RunStatus
from tests.runtime.aws import check_thread, final_state, seeded_target
from tests.runtime.scripts import Effects
from tests.runtime.worker_proc import WorkerConfig, config_json, work

ROOT = Path(__file__).resolve().parents[2]
TURNS = 3


def configs(target: object, effects: Path, n: int, **kw: object) -> list[WorkerConfig]:
    return [
        WorkerConfig(
            endpoint=target.endpoint_url,  # type: ignore[attr-defined]
            table=target.table,  # type: ignore[attr-defined]
            bucket=target.bucket,  # type: ignore[attr-defined]
            run_id="r1",
            worker=f"w{i}",
            effects_path=str(effects),
            tool_turns=TURNS,
            **kw,  # type: ignore[arg-type]
        )
        for i in range(n)
    ]


async def test_asyncio_workers_hand_over_at_deadlines(race_moto: str, tmp_path: Path) -> None:
    target = await seeded_target(race_moto)
    effects = tmp_path / "effects"
    # Short invocations: every worker keeps suspending and re-claiming, like SQS redeliveries.
    # On a loaded machine a 0.15 s invocation may end before it streams anything: the
    # no-progress guard (which fails such a run) is not what this test is about.
    workers = configs(
        target,
        effects,
        4,
        invocation_seconds=0.15,
        event_delay=0.005,
        max_idle_suspensions=1_000_000,
    )
    async with asyncio.timeout(120):
        ends = await asyncio.gather(*(work(c) for c in workers))
    total = sum(ends, Counter())
    print("invocation ends:", dict(total))
    run, messages, checkpoint = await final_state(target)
    assert run.status == RunStatus.COMPLETED and run.turn == TURNS + 1, run.error
    counts = check_thread(messages, Effects(str(effects)).all(), TURNS)
    assert sum(counts.values()) == TURNS
    assert checkpoint is None
    assert total["completed"] == 1 and total["busy"] >= 1


async def test_asyncio_workers_with_expiring_leases_fence_the_zombies(
    race_moto: str, tmp_path: Path
) -> None:
    target = await seeded_target(race_moto)
    effects = tmp_path / "effects"
    # No renewal and a lease shorter than a turn: leases expire mid-turn, another worker
    # takes over from the checkpoint, and the old holder must be fenced.
    workers = configs(target, effects, 3, lease_seconds=0.25, renew_every=0, event_delay=0.01)
    async with asyncio.timeout(120):
        ends = await asyncio.gather(*(work(c) for c in workers))
    total = sum(ends, Counter())
    print("invocation ends:", dict(total))
    run, messages, checkpoint = await final_state(target)
    assert run.status == RunStatus.COMPLETED, run.error
    check_thread(messages, Effects(str(effects)).all(), TURNS)
    assert checkpoint is None
    assert total["completed"] == 1 and total["fenced"] >= 1


@pytest.mark.slow
def test_os_processes_race_one_run(race_moto: str, tmp_path: Path) -> None:
    target = asyncio.run(seeded_target(race_moto))
    effects = tmp_path / "effects"
    # Short invocations and leases that expire mid-turn: claims, takeovers and fencing all
    # happen between processes.
    workers = configs(
        target,
        effects,
        3,
        lease_seconds=0.4,
        renew_every=0,
        event_delay=0.01,
        invocation_seconds=0.3,
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.runtime.worker_proc", config_json(c)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for c in workers
    ]
    total: Counter[str] = Counter()
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err[-3000:]
            total.update(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    run, messages, checkpoint = asyncio.run(final_state(target))
    assert run.status == RunStatus.COMPLETED
    check_thread(messages, Effects(str(effects)).all(), TURNS)
    assert checkpoint is None
    assert total["completed"] == 1
    assert total["busy"] + total["fenced"] + total["suspended"] >= 1
    print("invocation ends across processes:", dict(total))
