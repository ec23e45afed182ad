"""Backends for the thread-store tests: memory and a moto server (its own process, on
127.0.0.1). ``moto.mock_aws`` does not intercept aiobotocore (its stubbed responses are not
awaitable), so moto is always reached over HTTP.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aioboto3

from awaken_s3.threads import DynamoThreadStore, create_table, dynamodb_client_config


class FakeClock:
    """Wall-clock seconds that only move when a test says so."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class AwsTarget:
    endpoint_url: str
    table: str
    bucket: str


@asynccontextmanager
async def aws_clients(
    endpoint_url: str, *, config: Any | None = None, s3_config: Any | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    session = aioboto3.Session(region_name="us-east-1")
    async with (
        session.client(
            "dynamodb",
            endpoint_url=endpoint_url,
            config=config or dynamodb_client_config(total_max_attempts=3),
        ) as db,
        session.client("s3", endpoint_url=endpoint_url, config=s3_config) as s3,
    ):
        yield db, s3


async def fresh_target(db: Any, s3: Any, endpoint_url: str) -> AwsTarget:
    """A new table and bucket, so tests sharing one server never see each other's items."""
    suffix = uuid.uuid4().hex[:12]
    target = AwsTarget(endpoint_url, f"threads-{suffix}", f"messages-{suffix}")
    await create_table(db, target.table)
    await s3.create_bucket(Bucket=target.bucket)
    return target


def dynamo_store(db: Any, s3: Any, target: AwsTarget, **kwargs: Any) -> DynamoThreadStore:
    return DynamoThreadStore(target.table, client=db, s3_client=s3, bucket=target.bucket, **kwargs)
