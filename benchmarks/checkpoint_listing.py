"""How long listing every checkpoint takes on 100,000 keys: one flat paginated listing against
the 256 shard listings walked side by side (``S3StreamCheckpointStore.list_concurrency``).

Two servers of ``ListObjectsV2``, both behind the real store and the real aiobotocore
paginator:

* ``--server moto``: moto's server in a thread of this process on 127.0.0.1, real HTTP; the
  bucket is filled through moto's backend directly (100,000 PUTs over HTTP would time the
  filling). Moto scans every key of the bucket for each listing request, so it punishes many
  small requests in a way S3 does not.
* ``--server indexed`` (default): an in-process stand-in for the S3 client that answers each
  page from a sorted index (a bisect, as S3 seeks its index) after ``--latency`` seconds,
  like one S3 round trip. It times the request structure and the store's own work.

A share of the keys is in the legacy flat layout, as after an upgrade with runs in flight.
Prints one line per configuration.

    .venv/bin/python benchmarks/checkpoint_listing.py [--server indexed|moto] [--keys 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import logging
import statistics
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, cast

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


class IndexedPaginator:
    def __init__(self, client: IndexedS3) -> None:
        self.client = client

    def paginate(self, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        config = kwargs.pop("PaginationConfig", {})
        return self.client.pages(MaxKeys=config.get("PageSize", 1000), **kwargs)


class IndexedS3:
    """``list_objects_v2`` and its paginator over a sorted key list, ``latency`` per request."""

    def __init__(self, keys: list[str], latency: float) -> None:
        self.keys = sorted(keys)
        self.latency = latency
        self.requests = 0
        self.written = datetime(2026, 1, 1, tzinfo=UTC)

    def get_paginator(self, name: str) -> IndexedPaginator:
        assert name == "list_objects_v2"
        return IndexedPaginator(self)

    async def list_objects_v2(self, **kwargs: Any) -> dict[str, Any]:
        self.requests += 1
        await asyncio.sleep(self.latency)
        prefix, delimiter = kwargs.get("Prefix", ""), kwargs.get("Delimiter")
        start = kwargs.get("ContinuationToken") or prefix
        at = bisect.bisect_left(self.keys, start)
        if kwargs.get("ContinuationToken"):
            at = bisect.bisect_right(self.keys, start)
        contents: list[dict[str, Any]] = []
        last = None
        while at < len(self.keys) and len(contents) < kwargs.get("MaxKeys", 1000):
            key = self.keys[at]
            if not key.startswith(prefix):
                break
            last = key
            at += 1
            if delimiter and delimiter in key[len(prefix) :]:
                continue  # under a common prefix: not listed as an object
            contents.append({"Key": key, "LastModified": self.written})
        more = at < len(self.keys) and self.keys[at].startswith(prefix)
        page: dict[str, Any] = {"Contents": contents, "IsTruncated": more}
        if more:
            page["NextContinuationToken"] = last
        return page

    async def pages(self, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        token = kwargs.pop("ContinuationToken", None)
        while True:
            page = await self.list_objects_v2(ContinuationToken=token, **kwargs)
            yield page
            if not page["IsTruncated"]:
                return
            token = page["NextContinuationToken"]


def all_keys(keys: int, legacy: int) -> list[str]:
    return [
        proto.legacy_key(PREFIX, f"run-{n:07d}")
        if n < legacy
        else proto.object_key(PREFIX, f"run-{n:07d}")
        for n in range(keys)
    ]


async def time_indexed(
    keys: list[str], concurrency: int, repeat: int, latency: float
) -> tuple[list[float], int]:
    times, requests = [], 0
    for _ in range(repeat):
        client = IndexedS3(keys, latency)
        store = S3StreamCheckpointStore(
            BUCKET, prefix=PREFIX, client=cast(Any, client), list_concurrency=concurrency
        )
        started = time.perf_counter()
        count = sum([1 async for _ in store.list_run_ids()])
        times.append(time.perf_counter() - started)
        requests = client.requests
        if count != len(keys):
            raise SystemExit(f"listed {count} checkpoints, expected {len(keys)}")
    return times, requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--legacy", type=int, default=1_000, help="of them in the flat layout")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1, 4, 16, 64])
    parser.add_argument("--server", choices=["indexed", "moto"], default="indexed")
    parser.add_argument("--latency", type=float, default=0.05, help="indexed: s per request")
    parser.add_argument(
        "--quick", action="store_true", help="the smallest size (6,000 keys, once): that it runs"
    )
    args = parser.parse_args()
    if args.quick:
        # Past the flat pages the store reads before it walks the shards, so both paths run.
        args.keys, args.legacy, args.repeat, args.concurrency = 6_000, 100, 1, [1, 16]
        args.server, args.latency = "indexed", 0.0
    if args.server == "indexed":
        keys = all_keys(args.keys, args.legacy)
        print(f"indexed stand-in, {args.keys} keys ({args.legacy} legacy), {args.latency}s/request")
        for concurrency in args.concurrency:
            times, requests = asyncio.run(
                time_indexed(keys, concurrency, args.repeat, args.latency)
            )
            report(concurrency, times, f"{requests} requests")
        return
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
            report(concurrency, times, "moto")
    finally:
        server.stop()


def report(concurrency: int, times: list[float], note: str) -> None:
    how = "flat listing" if concurrency == 1 else f"256 shards, {concurrency} at once"
    print(
        f"{how:28s} median {statistics.median(times):6.2f} s  "
        f"(runs: {', '.join(f'{t:.2f}' for t in times)}; {note})"
    )


if __name__ == "__main__":
    main()
