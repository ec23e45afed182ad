"""Racing workers on one run: asyncio workers in one process, and OS processes.

Invariants only (no timing assertions): each turn committed exactly once, each tool run
exactly once (at most once when its outcome was reported unknown), the run completed.
Nothing here depends on the machine's speed: an invocation's deadline comes after a number
of streamed events, and in one process leases run out on a fake wall clock that the models
move as they stream (between processes, leases run on real time: only their takeovers'
timing varies, never the invariants).
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
from tests.fixtures.clock import FakeClock
from tests.runtime.aws import check_thread, final_state, seeded_target
from tests.runtime.scripts import Effects
from tests.runtime.worker_proc import WorkerConfig, config_json, work

ROOT = Path(__file__).resolve().parents[2]
TURNS = 3
#: seconds only a hung test reaches
HUNG = 180


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
    # Short invocations (a turn is about 14 events): every worker keeps suspending and
    # re-claiming, like SQS redeliveries; the others find the run busy meanwhile.
    workers = configs(target, effects, 4, invocation_events=8, event_delay=0.005)
    async with asyncio.timeout(HUNG):
        ends = await asyncio.gather(*(work(c) for c in workers))
    total = sum(ends, Counter())
    print("invocation ends:", dict(total))
    run, messages, checkpoint = await final_state(target)
    assert run.status == RunStatus.COMPLETED and run.turn == TURNS + 1, run.error
    counts = check_thread(messages, Effects(str(effects)).all(), TURNS)
    assert sum(counts.values()) == TURNS
    assert checkpoint is None
    assert total["completed"] == 1 and total["busy"] >= 1
    assert total["suspended"] >= TURNS + 1  # every turn outlasts an invocation


async def test_asyncio_workers_with_expiring_leases_fence_the_zombies(
    race_moto: str, tmp_path: Path
) -> None:
    target = await seeded_target(race_moto)
    effects = tmp_path / "effects"
    # No renewal and a lease shorter than a turn (8 of its ~14 events): leases expire
    # mid-turn, another worker takes over from the checkpoint, and the old holder must be
    # fenced. The holder never suspends, so only a takeover stops it.
    wall = FakeClock()
    workers = configs(
        target, effects, 3, lease_seconds=8.0, renew_every=0, wall_per_event=1.0, event_delay=0.01
    )
    async with asyncio.timeout(HUNG):
        ends = await asyncio.gather(*(work(c, wall=wall) for c in workers))
    total = sum(ends, Counter())
    print("invocation ends:", dict(total))
    run, messages, checkpoint = await final_state(target)
    assert run.status == RunStatus.COMPLETED, run.error
    check_thread(messages, Effects(str(effects)).all(), TURNS)
    assert checkpoint is None
    assert total["completed"] == 1 and total["fenced"] >= 1


@pytest.mark.slow
@pytest.mark.minutes
def test_os_processes_race_one_run(race_moto: str, tmp_path: Path) -> None:
    target = asyncio.run(seeded_target(race_moto))
    effects = tmp_path / "effects"
    # Invocations of 20 events (a turn and a half) and leases of 0.4 s never renewed:
    # claims, hand-overs at the deadline, takeovers of expired leases and fencing all happen
    # between processes. Which of them happen depends on the machine's speed; the invariants
    # do not. A takeover on a slow machine may leave an invocation that streamed nothing: the
    # no-progress guard is not what this test is about.
    workers = configs(
        target,
        effects,
        3,
        lease_seconds=0.4,
        renew_every=0,
        event_delay=0.01,
        invocation_events=20,
        max_idle_suspensions=1_000_000,
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
            out, err = proc.communicate(timeout=HUNG)
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
