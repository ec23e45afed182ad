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
from dataclasses import dataclass, field
from typing import Any

import aioboto3

from awaken_s3.demo.model import ContinuingModel
from awaken_s3.demo.settings import CHECKPOINT_PREFIX, LEASE_SECONDS
from awaken_s3.runtime.loop import RunLoop
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.outcome import TurnCompleted, TurnOutcome
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.runner import NOT_LOADED, TurnRunner
from awaken_s3.threads.dynamo import DynamoThreadStore, dynamodb_client_config


@dataclass
class PlanRecorder:
    """Wraps the turn runner to report which recovery plan each turn used."""

    runner: TurnRunner
    plans: list[str | None] = field(default_factory=list)

    async def run_turn(
        self,
        *,
        run_id: str,
        thread_id: str,
        turn: int,
        epoch: int,
        request: ModelRequest,
        deadline: float | None = None,
        existing: Any = NOT_LOADED,
    ) -> TurnOutcome:
        outcome = await self.runner.run_turn(
            run_id=run_id,
            thread_id=thread_id,
            turn=turn,
            epoch=epoch,
            request=request,
            deadline=deadline,
            existing=existing,
        )
        if isinstance(outcome, TurnCompleted):
            self.plans.append(outcome.plan_kind)
        return outcome


async def invoke(run_id: str, worker_id: str) -> dict[str, Any]:
    bucket = os.environ["AWAKEN_BUCKET"]
    table = os.environ["AWAKEN_TABLE"]
    session = aioboto3.Session()
    async with (
        session.client("dynamodb", config=dynamodb_client_config()) as db,
        session.client("s3") as s3,
    ):
        checkpoints = S3StreamCheckpointStore(bucket, prefix=CHECKPOINT_PREFIX, client=s3)
        threads = DynamoThreadStore(table, client=db, s3_client=s3, bucket=bucket)
        runner = TurnRunner(
            ContinuingModel(),
            checkpoints,
            writer_id=worker_id,
            checkpoint_policy=CheckpointPolicy(min_interval=0.2, min_bytes=256),
        )
        recorder = PlanRecorder(runner)
        loop = RunLoop(
            threads, recorder, checkpoints, worker_id=worker_id, lease_seconds=LEASE_SECONDS
        )
        result = await loop.run(run_id)
        return {
            "worker": worker_id,
            "pid": os.getpid(),
            "end": result.end.value,
            "turns_committed": result.turns_committed,
            "plans": recorder.plans,
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
