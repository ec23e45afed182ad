"""Merging shard listings: every item once, at most ``limit`` listings walked at once, the
first failure raised, an early stop leaving nothing running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.stores.listing import merge_bounded


class Walks:
    def __init__(self) -> None:
        self.active = 0
        self.most = 0
        self.closed = 0

    async def listing(
        self, name: str, count: int, fail_at: int | None = None
    ) -> AsyncIterator[str]:
        self.active += 1
        self.most = max(self.most, self.active)
        try:
            for n in range(count):
                await asyncio.sleep(0)  # a page's round trip: the others get their turn
                if n == fail_at:
                    raise StreamCheckpointError("S3 list failed: SlowDown (HTTP 503)")
                yield f"{name}-{n}"
        finally:
            self.active -= 1
            self.closed += 1


async def test_every_item_of_every_listing_once_at_most_limit_at_once() -> None:
    walks = Walks()
    listings = [walks.listing(f"s{n}", 5) for n in range(20)]
    items = [item async for item in merge_bounded(listings, 4)]
    assert sorted(items) == sorted(f"s{n}-{i}" for n in range(20) for i in range(5))
    assert walks.most == 4
    assert walks.active == 0


async def test_the_first_failure_is_raised_as_itself_and_stops_the_rest() -> None:
    walks = Walks()
    listings = [walks.listing(f"s{n}", 50, fail_at=3 if n == 2 else None) for n in range(8)]
    with pytest.raises(StreamCheckpointError, match="SlowDown"):
        _ = [item async for item in merge_bounded(listings, 4)]
    assert walks.active == 0


async def test_a_reader_that_stops_early_leaves_no_listing_running() -> None:
    walks = Walks()
    merged = merge_bounded([walks.listing(f"s{n}", 1_000) for n in range(8)], 4)
    taken = [await anext(merged) for _ in range(3)]
    await merged.aclose()
    assert len(taken) == 3
    assert walks.active == 0


async def test_a_limit_below_one_is_refused() -> None:
    none: list[AsyncIterator[str]] = []
    with pytest.raises(ValueError):
        _ = [item async for item in merge_bounded(none, 0)]
