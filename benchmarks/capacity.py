"""Requests per second one deployment sends each AWS service, as a function of concurrent
runs: the figures of docs/SCALING.md.

Measured part: the real :class:`~awaken_s3.streaming.coalescer.CoalescingCheckpointWriter`
(the writer every worker uses) over an in-memory store that counts requests and answers after
a fixed S3-like latency, fed by a simulated model stream (tokens per second, characters per
token), once as a run nobody follows (the policy's one put a second) and once as a followed
run (the push cadence, ``awaken_s3.service.push.PUSH_INTERVAL``). That gives S3 PUTs per
streaming second per run.

Analytic part: every other per-run rate comes from the constant of the module that sets it
(named in the table), and everything is scaled to N concurrent runs with a share followed,
the share of a run's time its model streams (the rest is tool calls and waiting), and turn
length; then set against each service's default limit, to say which bites first.

    .venv/bin/python benchmarks/capacity.py [--quick] [--runs 10000] [--followed 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.service.push import DISCOVER_EVERY, PUSH_INTERVAL
from awaken_s3.settings import DEFAULT_LEASE_SECONDS
from awaken_s3.stores import s3_protocol as proto
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.coalescer import (
    CheckpointPolicy,
    CoalescingCheckpointWriter,
    StatsCounter,
    WriterContext,
)

#: S3's documented request rates per partitioned prefix
S3_PUT_PER_PREFIX = 3_500
S3_GET_PER_PREFIX = 5_500
SHARDS = 16**proto.SHARD_HEX_DIGITS
#: DynamoDB on-demand: default table-level maximum of read and write request units per second
DDB_TABLE_RRU = 40_000
DDB_TABLE_WRU = 40_000
#: Lambda: default concurrent executions of an account in a Region
LAMBDA_ACCOUNT_CONCURRENCY = 1_000
#: template.yaml: WorkerMaxConcurrency default and maximum (the queue's event source mapping)
WORKER_MAX_CONCURRENCY_DEFAULT = 10
WORKER_MAX_CONCURRENCY_MAX = 1_000
#: API Gateway: account-level request rate per Region (REST, HTTP, WebSocket and the
#: @connections management API share it)
APIGW_ACCOUNT_RPS = 10_000
#: SQS FIFO per API action: 300/s without high-throughput mode; the run queue has it on
#: (template.yaml FifoThroughputLimit perMessageGroupId), whose default is region-dependent,
#: up to 70,000/s in the largest Regions and far less in some: check Service Quotas
SQS_FIFO_TPS = 300
SQS_FIFO_HIGH_THROUGHPUT_TPS = 70_000
#: seconds a worker invocation lasts before it hands the run over (template WorkerTimeout
#: 120, less AWAKEN_DEADLINE_MARGIN_SECONDS 10)
INVOCATION_SECONDS = 110.0


class CountingStore(InMemoryStreamCheckpointStore):
    """The in-memory store, answering each put after ``latency`` seconds, counting them."""

    def __init__(self, latency: float) -> None:
        super().__init__()
        self.latency = latency
        self.puts = 0
        self.gets = 0

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        self.puts += 1
        await asyncio.sleep(self.latency)
        return await super().put(checkpoint, expected_version=expected_version)

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        self.gets += 1
        return await super().get(run_id)


@dataclass(frozen=True)
class StreamShape:
    tokens_per_second: float
    chars_per_token: float = 4.0


async def measure_puts(
    shape: StreamShape, *, followed: bool, seconds: float, latency: float
) -> float:
    """S3 PUTs per streaming second of one run, from the real coalescing writer."""
    store = CountingStore(latency)
    text: list[str] = []
    token = "x" * max(1, round(shape.chars_per_token))

    def snapshot() -> StreamCheckpoint:
        return StreamCheckpoint(
            run_id="cap-1",
            thread_id="t",
            model="m",
            turn=0,
            partial_text="".join(text),
            epoch=1,
            writer="w",
        )

    interval: Callable[[], float | None] = (lambda: PUSH_INTERVAL) if followed else (lambda: None)
    writer = CoalescingCheckpointWriter(
        WriterContext(
            store=store,
            run_id="cap-1",
            epoch=1,
            writer_id="w",
            snapshot=snapshot,
            progress=lambda: sum(map(len, text)),
            version=None,
            version_known=True,
            policy=CheckpointPolicy(),
            clock=time.monotonic,
            stats=StatsCounter(),
            interval=interval,
        )
    )
    gap = 1.0 / shape.tokens_per_second
    started = time.monotonic()
    next_token = started
    while time.monotonic() - started < seconds:
        text.append(token)
        writer.offer(False)
        next_token += gap
        await asyncio.sleep(max(0.0, next_token - time.monotonic()))
    elapsed = time.monotonic() - started
    await writer.aclose()
    return store.puts / elapsed


@dataclass(frozen=True)
class Load:
    runs: int
    followed: float
    streaming_share: float
    turn_seconds: float
    followers_per_run: float = 1.0


@dataclass(frozen=True)
class Row:
    resource: str
    rate: float
    limit: float
    limit_name: str
    raise_it: str
    set_by: str
    runs: int = 0

    @property
    def runs_at_limit(self) -> float:
        """Concurrent runs (of this load's mix) at which the rate reaches the limit."""
        return self.runs * self.limit / self.rate if self.rate else float("inf")


def model(load: Load, put_unwatched: float, put_followed: float) -> list[Row]:
    """Requests per second at ``load.runs`` concurrent runs, per resource, and its limit."""
    n, f, s = load.runs, load.followed, load.streaming_share
    puts = n * s * ((1 - f) * put_unwatched + f * put_followed)
    renew = 3.0 / DEFAULT_LEASE_SECONDS  # lease.py: one renewal every lease/3
    per_turn = 1.0 / load.turn_seconds
    per_invocation = 1.0 / INVOCATION_SECONDS
    # The run loop's load at each invocation and turn start: one GET (two while a legacy
    # flat key may exist and the sharded one does not).
    gets = n * (per_invocation + per_turn)
    # PostToConnection: one frame batch per landed put, per follower (push.py sends what
    # became durable, batches at least PUSH_GAP apart).
    posts = n * f * s * put_followed * load.followers_per_run
    followers_query = n / DISCOVER_EVERY  # push.py: a consistent Query per run per look
    ddb_reads = n * per_turn * 2  # the run item and the thread at each turn
    ddb_writes = n * (renew + per_turn * 3)  # lease renewals; the turn's commit and its tools
    # The busiest single action: ChangeMessageVisibility rides every lease renewal;
    # receive and delete happen once per invocation.
    sqs = n * max(renew, per_invocation)
    rows = [
        Row(
            "S3 PUT, one flat prefix (before)",
            puts,
            S3_PUT_PER_PREFIX,
            "3,500/s per prefix",
            "shard the keys (done)",
            "streaming/coalescer.py, push.py",
        ),
        Row(
            "S3 PUT, 256 hashed prefixes",
            puts,
            S3_PUT_PER_PREFIX * SHARDS,
            "3,500/s x 256",
            "S3 splits partitions as load grows",
            "streaming/coalescer.py, push.py",
        ),
        Row(
            "S3 GET (loads), 256 prefixes",
            gets,
            S3_GET_PER_PREFIX * SHARDS,
            "5,500/s x 256",
            "-",
            "runtime/loop.py",
        ),
        Row(
            "DynamoDB connections table reads",
            followers_query,
            DDB_TABLE_RRU,
            "40,000 RRU/s on-demand",
            "table throughput quota",
            "service/push.py DISCOVER_EVERY",
        ),
        Row(
            "DynamoDB thread table reads",
            ddb_reads,
            DDB_TABLE_RRU,
            "40,000 RRU/s on-demand",
            "table throughput quota",
            "runtime/loop.py",
        ),
        Row(
            "DynamoDB writes (table)",
            ddb_writes,
            DDB_TABLE_WRU,
            "40,000 WRU/s on-demand",
            "table throughput quota",
            "runtime/lease.py",
        ),
        Row(
            "SQS FIFO, busiest action",
            sqs,
            SQS_FIFO_HIGH_THROUGHPUT_TPS,
            "high throughput, <=70,000/s",
            "Service Quotas: SQS (Region)",
            "service/visibility.py, lease.py",
        ),
        Row(
            "Lambda concurrent workers",
            float(n),
            WORKER_MAX_CONCURRENCY_DEFAULT,
            "WorkerMaxConcurrency 10",
            "WorkerMaxConcurrency (max 1000)",
            "template.yaml",
        ),
        Row(
            "Lambda account concurrency",
            float(n),
            LAMBDA_ACCOUNT_CONCURRENCY,
            "1,000 per Region",
            "Service Quotas: Lambda",
            "one run per invocation",
        ),
        Row(
            "API Gateway @connections posts",
            posts,
            APIGW_ACCOUNT_RPS,
            "10,000/s per account",
            "Service Quotas: API Gateway",
            "service/push.py PUSH_INTERVAL",
        ),
    ]
    return [Row(r.resource, r.rate, r.limit, r.limit_name, r.raise_it, r.set_by, n) for r in rows]


def render(rows: Sequence[Row], load: Load) -> str:
    head = (
        f"{load.runs:,} concurrent runs, {load.followed:.0%} followed, streaming "
        f"{load.streaming_share:.0%} of the time, {load.turn_seconds:.0f} s turns"
    )
    lines = [
        head,
        f"{'resource':34s} {'req/s':>10s} {'default limit':>26s} {'runs at limit':>14s}",
    ]
    for row in rows:
        lines.append(
            f"{row.resource:34s} {row.rate:10,.0f} {row.limit_name:>26s} {row.runs_at_limit:14,.0f}"
        )
    return "\n".join(lines)


def first_to_bite(rows: Sequence[Row], *, skip: Sequence[str] = ()) -> Row:
    return min((r for r in rows if r.resource not in skip), key=lambda r: r.runs_at_limit)


async def measured(quick: bool, latency: float) -> dict[str, float]:
    seconds = 1.5 if quick else 10.0
    results = {}
    for name, tps in (("fast", 150.0), ("slow", 40.0)):
        shape = StreamShape(tokens_per_second=tps)
        results[f"{name} unwatched"] = await measure_puts(
            shape, followed=False, seconds=seconds, latency=latency
        )
        results[f"{name} followed"] = await measure_puts(
            shape, followed=True, seconds=seconds, latency=latency
        )
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1.5 s streams instead of 10 s")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--followed", type=float, default=0.1)
    parser.add_argument("--streaming-share", type=float, default=0.6)
    parser.add_argument("--turn-seconds", type=float, default=30.0)
    parser.add_argument("--put-latency", type=float, default=0.03, help="seconds per S3 PUT")
    args = parser.parse_args(argv)
    rates = asyncio.run(measured(args.quick, args.put_latency))
    print("S3 PUTs per streaming second of one run (real coalescing writer):")
    for name, rate in rates.items():
        print(f"  {name:16s} {rate:5.2f}")
    unwatched = max(rates["fast unwatched"], rates["slow unwatched"])
    followed = max(rates["fast followed"], rates["slow followed"])
    load = Load(args.runs, args.followed, args.streaming_share, args.turn_seconds)
    rows = model(load, unwatched, followed)
    print()
    print(render(rows, load))
    print()
    for label, skip in (
        ("as deployed (template defaults)", ()),
        ("after raising WorkerMaxConcurrency", ("Lambda concurrent workers",)),
        (
            "after raising Lambda's account concurrency too",
            ("Lambda concurrent workers", "Lambda account concurrency"),
        ),
    ):
        row = first_to_bite(rows, skip=("S3 PUT, one flat prefix (before)", *skip))
        print(f"first limit {label}: {row.resource} at {row.runs_at_limit:,.0f} runs")
    flat = next(r for r in rows if r.resource.startswith("S3 PUT, one flat"))
    print(f"(the flat prefix alone would have capped S3 PUTs at {flat.runs_at_limit:,.0f} runs)")
    watched_only = model(Load(args.runs, 1.0, 1.0, args.turn_seconds), unwatched, followed)
    unwatched_only = model(Load(args.runs, 0.0, 1.0, args.turn_seconds), unwatched, followed)
    print(
        "flat prefix, every run streaming: "
        f"{watched_only[0].runs_at_limit:,.0f} followed runs or "
        f"{unwatched_only[0].runs_at_limit:,.0f} unwatched runs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
