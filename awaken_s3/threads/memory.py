"""An in-process thread store with the DynamoDB store's semantics, for tests and local use.

:class:`InMemoryThreadStore` is the shared algorithm (:class:`~awaken_s3.threads.persistence
.BaseThreadStore`) over a dictionary of items. Its writes are the DynamoDB store's own write
data, their conditions evaluated here (:mod:`awaken_s3.threads.evaluate`) instead of by
DynamoDB; one lock stands for DynamoDB's per-item atomicity and its transactions, so a
tool-call claim is checked against the run's epoch atomically.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from awaken_s3.threads import rules, writes
from awaken_s3.threads.backend import Cancelled, Item, Reason, Written
from awaken_s3.threads.cancellation import CONDITION_FAILED
from awaken_s3.threads.evaluate import holds, updated
from awaken_s3.threads.persistence import BaseThreadStore

_Key = tuple[str, str]


def _key(item: Item) -> _Key:
    return (str(item["pk"]), str(item["sk"]))


class InMemoryThreadStore(BaseThreadStore):
    """Items in a dictionary; nothing survives the process (and no message is too large)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        sweep_grace: float = rules.DEFAULT_SWEEP_GRACE,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(where="memory", clock=clock, sweep_grace=sweep_grace, sleep=sleep)
        self._items: dict[_Key, Item] = {}
        self._lock = asyncio.Lock()

    async def _get(self, key: Item, *, action: str) -> Item | None:
        item = self._items.get(_key(key))
        return None if item is None else dict(item)

    def _apply(self, write: writes.Write) -> Item | None:
        """``write`` applied to the items (its condition already judged)."""
        key = _key(write.key)
        if isinstance(write, writes.Put):
            self._items[key] = dict(write.item)
        elif isinstance(write, writes.Update):
            self._items[key] = updated(write, self._items.get(key))
        return self._items.get(key)

    async def _write(self, write: writes.Put | writes.Update, *, action: str) -> Written:
        async with self._lock:
            stored = self._items.get(_key(write.key))
            if not holds(write.condition, stored):
                return Written(False, None if stored is None else dict(stored))
            return Written(True, self._apply(write))

    async def _transact(
        self, items: Sequence[writes.Write], *, action: str, token: str | None = None
    ) -> Cancelled | None:
        async with self._lock:
            reasons = [self._reason(write) for write in items]
            if any(reason.code is not None for reason in reasons):
                return Cancelled(reasons)
            for write in items:
                self._apply(write)
            return None

    def _reason(self, write: writes.Write) -> Reason:
        stored = self._items.get(_key(write.key))
        if holds(write.condition, stored):
            return Reason(None)
        return Reason(CONDITION_FAILED, dict(stored) if write.return_old and stored else None)

    async def _query(self, query: writes.Query, *, action: str) -> list[Item]:
        found: list[Any] = [
            item
            for item in self._items.values()
            if all(name in item for name in query.index_keys) and holds(query.key_condition, item)
        ]
        found.sort(key=lambda item: item[query.sort_key])
        return [dict(item) for item in found[: query.limit]]
