"""Fixtures of the thread-store tests: each contract test runs on memory and on DynamoDB."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from awaken_s3.threads import InMemoryThreadStore, ThreadStore
from tests.fixtures.aws import aws_clients, dynamo_store, fresh_target
from tests.fixtures.clock import FakeClock


# One moto: in a thread or in its own process, it serves the same code over the same HTTP.
@pytest.fixture(params=["memory", "moto-server"])
async def store(request: pytest.FixtureRequest, clock: FakeClock) -> AsyncIterator[ThreadStore]:
    if request.param == "memory":
        yield InMemoryThreadStore(clock=clock)
        return
    url = request.getfixturevalue("moto_server").endpoint_url
    async with aws_clients(url) as (db, s3):
        target = await fresh_target(db, s3, url)
        yield dynamo_store(db, s3, target, clock=clock)
