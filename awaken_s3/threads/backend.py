"""What a thread-store backend provides: four I/O primitives (and the decoding they share).

:class:`~awaken_s3.threads.persistence.BaseThreadStore` implements every operation of
:mod:`awaken_s3.threads.base` over these, so a backend (memory, DynamoDB) writes only:

* ``_get(key)``: one item read consistently, or None;
* ``_write(put or update)``: one conditional write: :class:`Written` says whether it applied
  and carries the item after it (or the stored item when the condition was lost);
* ``_transact(writes)``: all or nothing; None when it applied, else :class:`Cancelled`, one
  :class:`Reason` per write (its code, and the stored item where the write asked for it);
* ``_query(query)``: the items a key condition selects, in sort-key order.

Writes and their conditions are data (:mod:`awaken_s3.threads.writes`); which part of a lost
condition failed is judged by evaluating that part against the stored item
(:mod:`awaken_s3.threads.evaluate`), so the rule is never restated.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from awaken_s3.messages import Message
from awaken_s3.threads import codec, rules, writes
from awaken_s3.threads.cancellation import (
    CONDITION_FAILED,
    StoredMessage,
    cancelled_error,
    transient_cancellation,
)
from awaken_s3.threads.errors import StoreUnavailable, ThreadStoreError
from awaken_s3.threads.models import RunState

logger = logging.getLogger("awaken_s3.threads")

Item = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Written:
    """The answer to one conditional write."""

    applied: bool
    #: the item after the write when it applied; the stored item (None: absent) when not
    item: Item | None


@dataclass(frozen=True, slots=True)
class Reason:
    """One write's part in a cancelled transaction."""

    #: None when this write's condition held
    code: str | None
    #: the stored item, for a write that asked for it (``return_old``)
    item: Item | None = None


@dataclass(frozen=True, slots=True)
class Cancelled:
    """A transaction that did not apply: one :class:`Reason` per write, in order."""

    reasons: list[Reason]
    #: the client's exception, chained as the cause of any store error reporting it
    cause: BaseException | None = None

    @property
    def codes(self) -> list[str | None]:
        return [reason.code for reason in self.reasons]

    def failed(self, position: int) -> bool:
        """Whether the write at ``position`` lost its condition."""
        return len(self.reasons) > position and self.reasons[position].code == CONDITION_FAILED


class StoreIO(ABC):
    """A backend's I/O and the decoding every operation shares."""

    def __init__(
        self,
        *,
        where: str,
        clock: Callable[[], float] = time.time,
        sweep_grace: float = rules.DEFAULT_SWEEP_GRACE,
        transient_retries: int = 5,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        #: what error messages name as the storage (the table)
        self._where = where
        self._clock = clock
        self._grace = sweep_grace
        self._retries = transient_retries
        self._sleep = sleep

    @abstractmethod
    async def _get(self, key: Item, *, action: str) -> Item | None: ...

    @abstractmethod
    async def _write(self, write: writes.Put | writes.Update, *, action: str) -> Written: ...

    @abstractmethod
    async def _transact(
        self, items: Sequence[writes.Write], *, action: str, token: str | None = None
    ) -> Cancelled | None: ...

    @abstractmethod
    async def _query(self, query: writes.Query, *, action: str) -> list[Item]: ...

    # -- hooks a backend may override

    async def _store_body(self, thread_id: str, seq: int, body: str) -> str | None:
        """Keep a message body apart and return its reference, or None to keep it inline."""
        return None

    async def _read_body(self, ref: str) -> bytes:
        raise ThreadStoreError(f"message body offloaded to {ref} but no S3 client configured")

    async def _system_prompt(self, run_id: str) -> str:
        """The system prompt a run's settings item keeps apart."""
        stored = await self._get(codec.settings_key(run_id), action=f"get_run_settings {run_id}")
        if stored is None:
            raise ThreadStoreError(f"run {run_id}: its settings item is missing")
        return codec.system_of(stored)

    def _remember_prompt(self, run_id: str, system: str) -> None:  # noqa: B027
        """A run was created with a prompt kept apart (a backend may cache it)."""

    # -- shared decoding and sending

    async def _run_of(self, item: Mapping[str, Any]) -> RunState:
        """A run item as a run, with the system prompt its settings item keeps apart."""
        if not codec.run_system_apart(item):
            return codec.run_of(item)
        return codec.run_of(item, system=await self._system_prompt(codec.run_id_of(item)))

    async def _message_of(self, item: Mapping[str, Any]) -> StoredMessage:
        ref = codec.message_body_ref(item)
        if ref is None:
            return codec.stored_message_of(item)
        return codec.stored_message_of(item, body=await self._read_body(ref))

    async def _message_items(
        self, thread_id: str, start: int, messages: Sequence[Message], commit_id: str
    ) -> list[Item]:
        """Items for ``messages``; a body kept apart is written first, under a unique key, so
        a transaction that then fails leaves an orphan object, never a dangling reference."""
        now = self._clock()
        items = []
        for seq, message in enumerate(messages, start):
            body: str | None = codec.encode_content(message)
            assert body is not None
            ref = await self._store_body(thread_id, seq, body)
            items.append(
                codec.message_item(
                    thread_id,
                    seq,
                    message,
                    commit_id=commit_id,
                    now=now,
                    body=None if ref is not None else body,
                    body_ref=ref,
                )
            )
        return items

    async def _transact_retrying(
        self,
        items: Sequence[writes.Write],
        *,
        action: str,
        token: str | None = None,
        unanswered: bool = False,
    ) -> Cancelled | None:
        """A transaction, sent again (the same request, bounded, with backoff) while it is
        cancelled for transient reasons only, and with ``unanswered`` while it gets no answer
        or a 5xx: its conditions recognise an earlier attempt that landed, so no duplicate.
        Returns the last answer; raises what the last attempt raised."""
        attempt = 0
        while True:
            try:
                cancelled = await self._transact(items, action=action, token=token)
            except StoreUnavailable:
                if not unanswered or attempt >= self._retries:
                    raise
            else:
                if cancelled is None or not transient_cancellation(cancelled.codes):
                    return cancelled
                if attempt >= self._retries:
                    return cancelled
            attempt += 1
            await self._sleep(min(0.05 * 2**attempt, 2.0))

    def _cancelled(self, cancelled: Cancelled, *, action: str) -> ThreadStoreError:
        """The store error for a transaction cancelled for no outcome of the contract."""
        error = cancelled_error(cancelled.codes, action=action, table=self._where)
        error.__cause__ = cancelled.cause
        return error
