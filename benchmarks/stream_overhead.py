"""What checkpointing costs a streaming turn: none vs coalesced vs inline-every-4.

Run: ``.venv/bin/python benchmarks/stream_overhead.py`` (about 45 s on 2 cores).

One scripted turn (``--deltas`` text deltas of about one token each, paced at
``--rate`` deltas/s on a fixed schedule, like a model that keeps generating while
its consumer is busy) goes through :class:`TurnRunner` with
:class:`S3StreamCheckpointStore` on a local moto server, three ways:

* ``none``: checkpointing off (the reference wall time);
* ``coalesced``: the runner's coalescing writer (default policy);
* ``inline``: the simple alternative, an awaited put every 4 deltas, plugged in
  through ``TurnRunner(writer_factory=...)``.

Per-request latency: an aiobotocore ``before-send`` hook on the benchmark's S3
client awaits ``asyncio.sleep(--latency)`` before each request is sent. It models
the network round trip to S3 without a proxy process and without burning CPU, so
the CPU figures below are the runner's and the S3 client's own work.

Printed per mode: wall time and its ratio to ``none``, PUT count (counted by the
same hook), and CPU per delta (``time.process_time`` over the turn divided by
the number of deltas; moto runs in another process and is not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import platform
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aioboto3

from awaken_s3.errors import CheckpointFenced, StreamCheckpointError
from awaken_s3.local.moto import MotoServer
from awaken_s3.messages import Message
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.streaming.coalescer import (
    CheckpointPolicy,
    StatsCounter,
    WriterContext,
    WriterFactory,
)
from awaken_s3.streaming.events import StreamEvent, TextDelta
from awaken_s3.streaming.outcome import TurnCompleted
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.streaming.scripted import ScriptedProvider, finish
from awaken_s3.streaming.turn_request import TurnRequest

BUCKET = "stream-overhead"
# About one token per delta, as providers stream them.
WORDS = ("the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog. ")


class InlineEvery4Writer:
    """The baseline: await a conditional put every 4 deltas, on the stream's path."""

    def __init__(self, ctx: WriterContext) -> None:
        self._ctx = ctx
        self.version: str | None = ctx.version
        self.fenced = False
        self.stats: StatsCounter = ctx.stats
        self._offers = 0

    def offer(self, boundary: bool) -> Any:
        self._offers += 1
        if self.fenced or self._offers % 4:
            return None
        return self._put()

    async def _put(self) -> None:
        try:
            self.version = await self._ctx.store.put(
                self._ctx.snapshot(), expected_version=self.version
            )
            self.stats.puts += 1
        except CheckpointFenced:
            self.fenced = True
        except StreamCheckpointError:
            self.stats.failures += 1

    async def write_now(self) -> None:
        await self._put()

    async def flush(self, *, force: bool = False) -> None:
        await self._put()

    async def settle(self) -> None:
        return None

    async def aclose(self) -> None:
        # Every put was awaited on the stream's path: none can still be in flight.
        return None


@dataclass
class Result:
    mode: str
    wall: float
    cpu: float
    puts: int
    stats_puts: int


def script(deltas: int) -> list[StreamEvent]:
    events: list[StreamEvent] = [TextDelta(WORDS[i % len(WORDS)]) for i in range(deltas)]
    return [*events, *finish()]


@contextlib.asynccontextmanager
async def s3_client(endpoint: str, latency: float, counts: dict[str, int]) -> AsyncIterator[Any]:
    session = aioboto3.Session()
    # Local server: fixed dummy credentials, never the caller's real ones.
    async with session.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
    ) as client:

        async def network_latency(**kwargs: Any) -> None:
            name = kwargs.get("event_name", "")
            operation = name.rsplit(".", 1)[-1]
            counts[operation] = counts.get(operation, 0) + 1
            await asyncio.sleep(latency)

        # aiobotocore awaits coroutine handlers; botocore's stubs only know sync ones.
        client.meta.events.register("before-send.s3.*", network_latency)  # type: ignore[arg-type]
        yield client


async def run_mode(
    mode: str, endpoint: str, *, deltas: int, rate: float, latency: float, run_index: int
) -> Result:
    counts: dict[str, int] = {}
    async with s3_client(endpoint, latency, counts) as client:
        store = S3StreamCheckpointStore(BUCKET, prefix=f"bench-{run_index}/", client=client)
        provider = ScriptedProvider([script(deltas)], delay=1.0 / rate, paced=True)
        # Typed arguments, not a dict of Any: mypy then holds the inline writer to the
        # runner's CheckpointWriter protocol, so a new method of it cannot break this script
        # unseen.
        factory: WriterFactory | None = InlineEvery4Writer if mode == "inline" else None
        runner = TurnRunner(
            provider,
            store,
            writer_id=f"bench-{mode}",
            checkpoint_policy=CheckpointPolicy(enabled=mode != "none"),
            writer_factory=factory,
        )
        request = ModelRequest(model="scripted", messages=(Message.user("Stream, please."),))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        outcome = await runner.run_turn(
            TurnRequest(
                run_id=f"run-{mode}-{run_index}",
                thread_id="bench",
                turn=0,
                epoch=1,
                request=request,
                existing=None,  # a fresh turn: no GET, so every mode starts alike
            )
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        assert isinstance(outcome, TurnCompleted), outcome
        assert len(outcome.message.text) > deltas
        return Result(mode, wall, cpu, counts.get("PutObject", 0), outcome.checkpoint_stats.puts)


async def hot_path(deltas: int) -> tuple[float, float]:
    """CPU per delta of fold + offer alone (no provider, no network), without and with
    the coalescing writer over an in-memory store: the runner's own per-delta cost,
    snapshots and encoding of the puts included (the loop runs every 50 deltas)."""
    from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
    from awaken_s3.streaming.accumulator import StreamAccumulator
    from awaken_s3.streaming.coalescer import CoalescingCheckpointWriter

    events = script(deltas)[:-2]
    figures = []
    for coalesced in (False, True):
        acc = StreamAccumulator()
        writer = CoalescingCheckpointWriter(
            WriterContext(
                store=InMemoryStreamCheckpointStore(),
                run_id="hot-path",
                epoch=1,
                writer_id="bench",
                snapshot=lambda acc=acc: acc.snapshot(  # type: ignore[misc]
                    run_id="hot-path",
                    thread_id="bench",
                    model="m",
                    turn=0,
                    retry_count=0,
                    epoch=1,
                    writer="bench",
                ),
                progress=lambda acc=acc: acc.content_chars,  # type: ignore[misc]
                version=None,
                version_known=True,
                policy=CheckpointPolicy(),
                clock=time.monotonic,
                stats=StatsCounter(),
            )
        )
        cpu0 = time.process_time()
        for i, event in enumerate(events):
            boundary = acc.apply(event)
            if coalesced:
                writer.offer(boundary)
            if i % 50 == 0:
                await asyncio.sleep(0)
        await writer.settle()
        figures.append((time.process_time() - cpu0) / deltas * 1e6)
        writer.close()
    return figures[0], figures[1]


async def main(args: argparse.Namespace) -> None:
    with MotoServer.start() as server:
        async with s3_client(server.endpoint_url, 0.0, {}) as client:
            await client.create_bucket(Bucket=BUCKET)
        # Warm-up: imports, connection pool, moto's first-request costs.
        await run_mode(
            "coalesced", server.endpoint_url, deltas=50, rate=1000, latency=0.0, run_index=0
        )
        results = [
            await run_mode(
                mode,
                server.endpoint_url,
                deltas=args.deltas,
                rate=args.rate,
                latency=args.latency,
                run_index=i + 1,
            )
            for i, mode in enumerate(["none", "coalesced", "inline"])
        ]
    fold_only, fold_and_offer = await hot_path(args.hot_deltas)
    base = results[0].wall
    ideal = args.deltas / args.rate
    print(
        f"stream_overhead: {args.deltas} deltas at {args.rate:g}/s (ideal {ideal:.2f}s), "
        f"S3 = moto server {server.endpoint_url} + {args.latency * 1000:.0f} ms before-send "
        f"latency per request; Python {platform.python_version()}, {platform.machine()}"
    )
    print(f"{'mode':<10} {'wall s':>8} {'x none':>8} {'PUTs':>6} {'CPU us/delta':>13}")
    for r in results:
        print(
            f"{r.mode:<10} {r.wall:>8.2f} {r.wall / base:>8.3f} {r.puts:>6} "
            f"{r.cpu / args.deltas * 1e6:>13.1f}"
        )
    print(
        f"hot path ({args.hot_deltas} deltas, in-memory store): fold {fold_only:.2f} us/delta, "
        f"fold + coalescing offer {fold_and_offer:.2f} us/delta"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=200.0, help="deltas per second")
    parser.add_argument("--latency", type=float, default=0.04, help="seconds per S3 request")
    parser.add_argument("--hot-deltas", type=int, default=20_000, help="deltas of the hot path")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smallest size (seconds): shows the script runs, its figures mean nothing",
    )
    parsed = parser.parse_args()
    if parsed.quick:
        parsed.deltas, parsed.rate, parsed.latency, parsed.hot_deltas = 100, 400.0, 0.01, 2000
    asyncio.run(main(parsed))
