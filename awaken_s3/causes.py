"""Walking an exception's chain: what the SDKs wrap (httpx under openai and anthropic, aiohttp
under aiobotocore) is found only by following ``__cause__`` and ``__context__``."""

from __future__ import annotations

from collections.abc import Iterator


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then each exception it was raised from or while handling, outermost first
    (a cycle is walked once)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
