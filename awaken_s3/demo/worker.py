"""One demo worker process: one invocation of the run loop, as an SQS delivery would do.

``python -m awaken_s3.demo.worker RUN_ID WORKER_ID`` with ``AWAKEN_BUCKET``,
``AWAKEN_TABLE`` and the standard ``AWS_ENDPOINT_URL`` in the environment. It prints
one JSON line: how the invocation ended and which recovery plans its turns used.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from awaken_s3.demo.model import ContinuingModel
from awaken_s3.demo.settings import LEASE_SECONDS
from awaken_s3.runtime.loop import RunLoop
from awaken_s3.service.instrumented import InstrumentedRunner
from awaken_s3.service.wiring import open_services
from awaken_s3.settings import StorageSettings
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.runner import TurnRunner


async def invoke(run_id: str, worker_id: str) -> dict[str, Any]:
    async with open_services(StorageSettings.from_env()) as services:
        checkpoints, threads = services.checkpoints, services.threads
        runner = TurnRunner(
            ContinuingModel(),
            checkpoints,
            writer_id=worker_id,
            checkpoint_policy=CheckpointPolicy(min_interval=0.2, min_bytes=256),
        )
        recorder = InstrumentedRunner(runner)
        loop = RunLoop(
            threads, recorder, checkpoints, worker_id=worker_id, lease_seconds=LEASE_SECONDS
        )
        result = await loop.run(run_id)
        return {
            "worker": worker_id,
            "pid": os.getpid(),
            "end": result.end.value,
            "turns_committed": result.turns_committed,
            # Plans of the resumed turns (a fresh turn has none).
            "plans": sorted(recorder.tally.plans.elements()),
            "error": result.error.code if result.error else None,
        }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m awaken_s3.demo.worker RUN_ID WORKER_ID", file=sys.stderr)
        return 2
    report = asyncio.run(invoke(args[0], args[1]))
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
