"""A worker that keeps invoking the run loop on one run until the run ends.

Used in-process (several asyncio workers) and as an OS process
(``python -m tests.runtime.worker_proc CONFIG_JSON``) against one moto server. Each
invocation is what one SQS delivery would do: claim, work until done or the deadline, and
hand over. Faults for the kill tests:

* ``hang_on_delete``: after the commit, the checkpoint delete writes ``marker`` and hangs
  (the parent SIGKILLs the process there: committed, checkpoint left behind);
* ``hang_in_tool``: the tool records its side effect, writes ``marker`` and hangs (killed
  between the tool-call claim and its result).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from awaken_s3.runtime.loop import RunEnd, RunLoop
from awaken_s3.runtime.tools import Tool, ToolRegistry
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads import DynamoThreadStore
from tests.fixtures.aws import aws_clients
from tests.fixtures.clock import FakeClock
from tests.runtime.scripts import ADD_SCHEMA, Effects, TurnAwareProvider, tool_turns

FINAL = {RunEnd.COMPLETED, RunEnd.FAILED, RunEnd.CANCELLED, RunEnd.NOT_RUNNABLE}


@dataclass
class WorkerConfig:
    endpoint: str
    table: str
    bucket: str
    run_id: str
    worker: str
    effects_path: str
    tool_turns: int = 3
    lease_seconds: float = 2.0
    #: None: renew every lease/3; 0: never (leases expire mid-turn, forcing takeovers)
    renew_every: float | None = None
    #: model events an invocation may stream before its deadline (None: no deadline). Counted,
    #: not timed: every invocation streams that much however loaded the machine is
    invocation_events: int | None = None
    #: with a shared fake wall clock (``work(wall=)``): seconds it moves per streamed event,
    #: so that leases run out after so many events, not after so much real time
    wall_per_event: float = 0.0
    event_delay: float = 0.0
    idempotent: bool = False
    mode: str = "normal"
    marker: str = ""
    max_invocations: int = 400
    max_interruptions: int = 100
    #: hand-overs in a row without progress before the run fails with ``no_progress``
    max_idle_suspensions: int = 5


def _mark(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class _HangingDeletes:
    """A checkpoint store whose delete marks the moment and never returns."""

    def __init__(self, inner: S3StreamCheckpointStore, marker: str) -> None:
        self._inner = inner
        self._marker = marker

    async def get(self, run_id: str) -> Any:
        return await self._inner.get(run_id)

    async def put(self, checkpoint: Any, *, expected_version: str | None) -> str:
        return await self._inner.put(checkpoint, expected_version=expected_version)

    async def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        _mark(self._marker, "committed")
        await asyncio.Event().wait()


def registry_for(config: WorkerConfig, effects: Effects) -> ToolRegistry:
    def add(a: int, b: int) -> str:
        effects.record(f"add:{a}")
        if config.mode == "hang_in_tool":
            _mark(config.marker, "claimed")
            time.sleep(3600)
        return str(a + b)

    return ToolRegistry([Tool("add", "Add.", ADD_SCHEMA, add, idempotent=config.idempotent)])


#: a tick of an invocation's clock: long enough that the runner's watchdog, which waits real
#: seconds for the next event, never takes a slow machine for the deadline
TICK = 1000.0


async def work(config: WorkerConfig, *, wall: FakeClock | None = None) -> Counter[str]:
    """Invoke the loop until the run ends; returns how each invocation ended.

    ``wall`` replaces the wall clock of leases (workers in one process share it); without it
    leases run on real time, as between processes."""
    ends: Counter[str] = Counter()
    effects = Effects(config.effects_path)
    # The invocation's deadline clock: one tick per event this worker's model streams.
    ticks = FakeClock(0.0)

    async def tick(turn: int, index: int) -> None:
        ticks.advance(TICK)
        if wall is not None:
            wall.advance(config.wall_per_event)

    clock: Callable[[], float] = wall if wall is not None else time.time
    async with aws_clients(config.endpoint) as (db, s3):
        threads = DynamoThreadStore(
            config.table, client=db, s3_client=s3, bucket=config.bucket, clock=clock
        )
        checkpoints: Any = S3StreamCheckpointStore(config.bucket, client=s3)
        if config.mode == "hang_on_delete":
            checkpoints = _HangingDeletes(checkpoints, config.marker)
        provider = TurnAwareProvider(
            tool_turns(config.tool_turns), delay=config.event_delay, pause=tick
        )
        runner = TurnRunner(
            provider,
            checkpoints,
            writer_id=config.worker,
            retry_policy=RetryPolicy(
                base_delay=0.0, max_delay=0.0, max_interruptions=config.max_interruptions
            ),
            checkpoint_policy=CheckpointPolicy(min_interval=0.0, min_bytes=1),
            clock=ticks,
        )
        loop = RunLoop(
            threads,
            runner,
            checkpoints,
            registry_for(config, effects),
            worker_id=config.worker,
            lease_seconds=config.lease_seconds,
            renew_every=config.renew_every,
            max_idle_suspensions=config.max_idle_suspensions,
            clock=clock,
            monotonic=ticks,
        )
        for _ in range(config.max_invocations):
            deadline = (
                None
                if config.invocation_events is None
                else ticks() + config.invocation_events * TICK
            )
            result = await loop.run(config.run_id, deadline=deadline)
            ends[result.end.value] += 1
            if result.end in FINAL:
                break
            if result.end == RunEnd.BUSY:
                await asyncio.sleep(min(result.retry_after or 0.05, 0.05))
    return ends


def main() -> None:
    config = WorkerConfig(**json.loads(sys.argv[1]))
    ends = asyncio.run(work(config))
    print(json.dumps(dict(ends)), flush=True)


def config_json(config: WorkerConfig) -> str:
    return json.dumps(asdict(config))


if __name__ == "__main__":
    main()
