"""Merging many paginated listings into one stream, at most so many in flight at once.

A sharded checkpoint listing is 256 short listings (one per hashed prefix) instead of one
long one: each is one page or a few, so walking them side by side costs the latency of the
longest few rather than the sum of 100 sequential pages.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

_T = TypeVar("_T")

#: items buffered between the listings and their reader (bounds memory on huge buckets)
_BUFFER = 4096


@dataclass(frozen=True, slots=True)
class _Done:
    """One worker found no listing left to walk."""


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


@dataclass(frozen=True, slots=True)
class _Item(Generic[_T]):
    value: _T


async def merge_bounded(listings: list[AsyncIterator[_T]], limit: int) -> AsyncGenerator[_T, None]:
    """Every item of every listing, in no promised order, walking at most ``limit`` listings
    at once. The first error of any listing is raised to the reader and stops the rest;
    closing the reader early stops them too."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    pending = iter(listings)
    queue: asyncio.Queue[_Item[_T] | _Done | _Failed] = asyncio.Queue(_BUFFER)
    workers = [asyncio.create_task(_walk(pending, queue)) for _ in range(min(limit, len(listings)))]
    try:
        running = len(workers)
        while running:
            entry = await queue.get()
            if isinstance(entry, _Done):
                running -= 1
            elif isinstance(entry, _Failed):
                raise entry.error
            else:
                yield entry.value
    finally:
        for worker in workers:
            worker.cancel()
        for worker in workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        for listing in listings:
            closer = getattr(listing, "aclose", None)
            if closer is not None:
                with contextlib.suppress(Exception):
                    await closer()


async def _walk(
    pending: Iterator[AsyncIterator[_T]], queue: asyncio.Queue[_Item[_T] | _Done | _Failed]
) -> None:
    # The listings share one iterator, so each is walked by exactly one worker.
    try:
        for listing in pending:
            async for value in listing:
                await queue.put(_Item(value))
    except Exception as exc:  # handed to the reader, which raises it
        await queue.put(_Failed(exc))
        return
    await queue.put(_Done())
