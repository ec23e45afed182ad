"""A turn with three 1-second tool calls: run one after another vs concurrently.

Run: ``.venv/bin/python benchmarks/parallel_tools.py`` (about 25 s). ``--moto`` also measures
with DynamoDB and S3 on a moto server on 127.0.0.1 (every call claimed and recorded by a real
conditional write, as in production); ``--rounds N`` (3).

One run of an agent whose model asks for three lookups in its first turn, each of which
takes one second (an async tool awaiting a one-second sleep, what a remote API call is to the
worker), then answers. The same run is driven through the real run loop and turn runner twice
per round, side by side: with ``max_parallel_tools=1`` (how every call ran before) and with
the default bound (4). Printed: the run's wall time for each, median over the rounds, and the
ratio. The model streams instantly, so what is left is the tools' time plus the stores'.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from awaken_s3 import Agent, App, tool
from awaken_s3.agents import DEFAULT_MAX_PARALLEL_TOOLS
from awaken_s3.runtime.loop import RunEnd, RunLoop
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads import InMemoryThreadStore, RunSettings
from tests.fixtures.runs import seed_run
from tests.runtime.scripts import TurnAwareProvider, TurnSpec

TOOL_SECONDS = 1.0
TURNS = [
    TurnSpec(
        "Looking up three things.",
        tuple((f"call-{n}", "lookup", {"topic": f"topic {n}"}) for n in range(3)),
    ),
    TurnSpec("Here is what I found."),
]


@tool(idempotent=True)
async def lookup(topic: str) -> str:
    """Look a topic up (a second by default, like a remote API)."""
    await asyncio.sleep(TOOL_SECONDS)
    return f"notes on {topic}"


async def memory_backend(stack: AsyncExitStack) -> tuple[Any, Any]:
    return InMemoryThreadStore(), InMemoryStreamCheckpointStore()


async def moto_backend(url: str, stack: AsyncExitStack) -> tuple[Any, Any]:
    from awaken_s3.stores.s3 import S3StreamCheckpointStore
    from tests.fixtures.aws import aws_clients, dynamo_store, fresh_target

    db, s3 = await stack.enter_async_context(aws_clients(url))
    target = await fresh_target(db, s3, url)
    return dynamo_store(db, s3, target), S3StreamCheckpointStore(target.bucket, client=s3)


async def one_run(make: Callable[[AsyncExitStack], Any], parallel: int) -> float:
    agent = Agent("researcher", tools=[lookup], max_parallel_tools=parallel)
    async with AsyncExitStack() as stack:
        threads, checkpoints = await make(stack)
        settings = RunSettings(model="m", tools=("lookup",), agent=agent.name)
        await seed_run(threads, settings=settings)
        runner = TurnRunner(TurnAwareProvider(TURNS), checkpoints, writer_id="bench")
        loop = RunLoop(threads, runner, checkpoints, worker_id="bench", app=App([agent]))
        started = time.perf_counter()
        result = await loop.run("r1")
        elapsed = time.perf_counter() - started
        assert result.end == RunEnd.COMPLETED and result.tool_calls == 3, result
        return elapsed


async def measure(name: str, make: Callable[[AsyncExitStack], Any], rounds: int) -> None:
    sequential: list[float] = []
    parallel: list[float] = []
    await one_run(make, DEFAULT_MAX_PARALLEL_TOOLS)  # warm the imports and the backend
    for _ in range(rounds):
        sequential.append(await one_run(make, 1))
        parallel.append(await one_run(make, DEFAULT_MAX_PARALLEL_TOOLS))
    seq, par = statistics.median(sequential), statistics.median(parallel)
    print(f"| {name} | {seq:.3f} s | {par:.3f} s | **{seq / par:.2f}x** |")


async def main() -> None:
    global TOOL_SECONDS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--moto", action="store_true", help="also on DynamoDB and S3 (moto)")
    parser.add_argument("--tool-seconds", type=float, default=TOOL_SECONDS)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smallest size (seconds, moto included): shows the script runs, its figures "
        "mean nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.moto, args.tool_seconds = 1, True, 0.2
    TOOL_SECONDS = args.tool_seconds
    print(
        f"Python {platform.python_version()}, {args.rounds} rounds, medians, "
        f"tools of {TOOL_SECONDS:g} s"
    )
    print("| stores | sequential (bound 1) | concurrent (bound 4) | sequential / concurrent |")
    print("|---|---|---|---|")
    await measure("in memory", memory_backend, args.rounds)
    if args.moto:
        from awaken_s3.local.moto import MotoServer

        # moto takes any credentials; these only make botocore sign its requests.
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

        server = MotoServer.start()
        try:

            async def on_moto(stack: AsyncExitStack) -> Any:
                return await moto_backend(server.endpoint_url, stack)

            await measure("DynamoDB + S3 on moto", on_moto, args.rounds)
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
