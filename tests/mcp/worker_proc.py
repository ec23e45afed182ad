"""A worker whose agent calls one counting-server tool, invoked until its run ends: in this
process (the rescuer) or as an OS process the kill test SIGKILLs mid-call
(``python -m tests.mcp.worker_proc CONFIG_JSON``). DynamoDB and S3 on a moto server, leases on
real time (as between processes)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace

from awaken_s3 import Agent, App, MCPServer
from awaken_s3.runtime.loop import RunEnd, RunLoop
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads import DynamoThreadStore
from tests.fixtures.aws import AwsTarget, aws_clients, dynamo_store, fresh_target
from tests.fixtures.runs import SETTINGS, seed_run
from tests.runtime.scripts import TurnAwareProvider, TurnSpec

FINAL = {RunEnd.COMPLETED, RunEnd.FAILED, RunEnd.CANCELLED, RunEnd.NOT_RUNNABLE}
AGENT = "mcp"


@dataclass
class McpWorker:
    endpoint: str
    table: str
    bucket: str
    #: the counting server
    url: str
    #: the tool the model calls (with text "hang": its first call never answers)
    tool: str
    worker: str
    #: long enough that the doomed worker, a fresh process that imports the SDK and lists
    #: the server first, holds its lease until the server has the call on a loaded machine
    lease_seconds: float = 10.0
    max_invocations: int = 2000


def script(tool: str) -> list[TurnSpec]:
    return [TurnSpec("Calling it.", (("call-0", tool, {"text": "hang"}),)), TurnSpec("Done.")]


async def seeded(endpoint: str) -> AwsTarget:
    async with aws_clients(endpoint) as (db, s3):
        target = await fresh_target(db, s3, endpoint)
        settings = replace(SETTINGS, agent=AGENT, tools=("send_note", "set_flag"))
        await seed_run(dynamo_store(db, s3, target), settings=settings)
        return target


async def work(config: McpWorker) -> Counter[str]:
    ends: Counter[str] = Counter()
    agent = Agent(AGENT, toolsets=[MCPServer(config.url)])
    async with aws_clients(config.endpoint) as (db, s3):
        threads = DynamoThreadStore(
            config.table, client=db, s3_client=s3, bucket=config.bucket, clock=time.time
        )
        checkpoints = S3StreamCheckpointStore(config.bucket, client=s3)
        runner = TurnRunner(
            TurnAwareProvider(script(config.tool)),
            checkpoints,
            writer_id=config.worker,
            retry_policy=RetryPolicy(base_delay=0.0, max_delay=0.0, max_interruptions=5),
            checkpoint_policy=CheckpointPolicy(min_interval=0.0, min_bytes=1),
        )
        loop = RunLoop(
            threads,
            runner,
            checkpoints,
            worker_id=config.worker,
            lease_seconds=config.lease_seconds,
            clock=time.time,
            app=App([agent]),
        )
        for _ in range(config.max_invocations):
            result = await loop.run("r1")
            ends[result.end.value] += 1
            if result.end in FINAL:
                break
            if result.end == RunEnd.BUSY:
                # Another worker's lease: wait for it to run out (real time, as in Lambda).
                await asyncio.sleep(min(result.retry_after or 0.1, 0.1))
    return ends


def config_json(config: McpWorker) -> str:
    return json.dumps(asdict(config))


if __name__ == "__main__":
    asyncio.run(work(McpWorker(**json.loads(sys.argv[1]))))
