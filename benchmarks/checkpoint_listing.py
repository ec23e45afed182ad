"""How long listing every checkpoint takes on 100,000 keys: one flat paginated listing against
the 256 shard listings walked side by side (``S3StreamCheckpointStore.list_concurrency``).

Runs moto's server in a thread of this process on 127.0.0.1 (real HTTP, real aiobotocore
paginator); the bucket is filled through moto's backend directly, since 100,000 PUTs over
HTTP would take minutes and say nothing about listing. A share of the keys is in the legacy
flat layout, as after an upgrade with runs in flight. Prints one line per configuration.

    .venv/bin/python benchmarks/checkpoint_listing.py [--keys 100000] [--legacy 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
from typing import Any

import aioboto3
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends
from moto.server import ThreadedMotoServer

from awaken_s3.local.ports import free_port, wait_for_port
from awaken_s3.stores import s3_protocol as proto
from awaken_s3.stores.s3 import S3StreamCheckpointStore

BUCKET = "listing-bench"
PREFIX = "checkpoints/"


def fill(keys: int, legacy: int) -> None:
    backend: Any = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for n in range(keys):
        run_id = f"run-{n:07d}"
        key = proto.legacy_key(PREFIX, run_id) if n < legacy else proto.object_key(PREFIX, run_id)
        backend.put_object(BUCKET, key, b"{}")


async def time_listing(endpoint: str, concurrency: int, repeat: int, expected: int) -> list[float]:
    session = aioboto3.Session(
        region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    times = []
    async with session.client("s3", endpoint_url=endpoint) as client:
        store = S3StreamCheckpointStore(
            BUCKET, prefix=PREFIX, client=client, list_concurrency=concurrency
        )
        for _ in range(repeat):
            started = time.perf_counter()
            count = sum([1 async for _ in store.list_run_ids()])
            times.append(time.perf_counter() - started)
            if count != expected:
                raise SystemExit(f"listed {count} checkpoints, expected {expected}")
    return times


async def create_bucket(endpoint: str) -> None:
    session = aioboto3.Session(
        region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    async with session.client("s3", endpoint_url=endpoint) as client:
        await client.create_bucket(Bucket=BUCKET)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--legacy", type=int, default=1_000, help="of them in the flat layout")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1, 4, 16, 64])
    args = parser.parse_args()
    # One access-log line per request would time the terminal, not the listing.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        wait_for_port(port)
        endpoint = f"http://127.0.0.1:{port}"
        asyncio.run(create_bucket(endpoint))
        started = time.perf_counter()
        fill(args.keys, args.legacy)
        took = time.perf_counter() - started
        print(f"filled {args.keys} keys ({args.legacy} legacy) in {took:.1f} s")
        for concurrency in args.concurrency:
            times = asyncio.run(time_listing(endpoint, concurrency, args.repeat, args.keys))
            how = "flat listing" if concurrency == 1 else f"256 shards, {concurrency} at once"
            print(
                f"{how:28s} median {statistics.median(times):6.2f} s  "
                f"(runs: {', '.join(f'{t:.2f}' for t in times)})"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
