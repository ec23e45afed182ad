"""The thread store over one DynamoDB table (aiobotocore), with S3 offload of big messages.

:class:`DynamoThreadStore` is the shared algorithm (:class:`~awaken_s3.threads.persistence
.BaseThreadStore`) over four DynamoDB calls: ``GetItem``, a conditional ``PutItem`` /
``UpdateItem``, ``TransactWriteItems`` and ``Query``. Requests are compiled from the write
data (:mod:`awaken_s3.threads.expressions`), so the table itself checks every condition that
fences a stale worker; every failure of the client leaves as the store's own error
(:mod:`awaken_s3.threads.client_errors`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from aiobotocore.config import AioConfig
from botocore.exceptions import ClientError

from awaken_s3.threads import codec, expressions, rules, writes
from awaken_s3.threads.backend import Cancelled, Item, Reason, Written
from awaken_s3.threads.cancellation import parse_reason_codes
from awaken_s3.threads.client_errors import CLIENT_ERRORS, dynamodb_error, error_code
from awaken_s3.threads.offload import (
    DEFAULT_OFFLOAD_PREFIX,
    DEFAULT_OFFLOAD_THRESHOLD,
    MessageBodies,
)
from awaken_s3.threads.persistence import BaseThreadStore
from awaken_s3.threads.prompts import SYSTEM_PROMPTS

if TYPE_CHECKING:
    # Stubs only: the clients are whatever aiobotocore session the caller opened.
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_s3 import S3Client

__all__ = [
    "DEFAULT_OFFLOAD_PREFIX",
    "DEFAULT_OFFLOAD_THRESHOLD",
    "DynamoThreadStore",
    "create_table",
    "dynamodb_client_config",
]

_CONDITION_FAILED: Final = ("ConditionalCheckFailedException",)
_CANCELLED: Final = ("TransactionCanceledException",)


def dynamodb_client_config(
    *, total_max_attempts: int = 8, mode: Literal["standard", "adaptive"] = "standard"
) -> AioConfig:
    """Client config for the thread table: botocore's standard (or adaptive) retry mode.

    Standard mode retries throttling (ProvisionedThroughputExceeded, ThrottlingException),
    5xx and connection errors with jittered backoff, up to ``total_max_attempts`` attempts in
    all (botocore's ``max_attempts`` key would count retries only). A transaction cancelled
    for TransactionConflict is not retried by botocore; the store retries it itself.
    """
    return AioConfig(retries={"mode": mode, "total_max_attempts": total_max_attempts})


async def create_table(client: DynamoDBClient, table_name: str) -> None:
    """Create the on-demand table (tests, local servers; production uses template.yaml)."""
    await client.create_table(TableName=table_name, **expressions.table_definition())


class DynamoThreadStore(BaseThreadStore):
    """``client`` is an aiobotocore DynamoDB client the caller owns (build it with
    :func:`dynamodb_client_config`). ``s3_client`` + ``bucket`` enable offloading messages
    whose body exceeds ``offload_threshold`` bytes; without them such a message raises
    :class:`MessageTooLarge` before any write. Both clients are typed with the
    ``types-aiobotocore`` stubs, which only type checking imports.

    Raises only :class:`ThreadStoreError` and its subclasses: a missing table is
    :class:`TableNotFound`, throttling beyond the client's retries :class:`StoreThrottled`,
    no answer or a 5xx :class:`StoreUnavailable` (see :mod:`awaken_s3.threads.errors`).
    """

    def __init__(
        self,
        table_name: str,
        *,
        client: DynamoDBClient,
        s3_client: S3Client | None = None,
        bucket: str | None = None,
        offload_prefix: str = DEFAULT_OFFLOAD_PREFIX,
        offload_threshold: int = DEFAULT_OFFLOAD_THRESHOLD,
        clock: Callable[[], float] = time.time,
        transient_retries: int = 5,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        sweep_grace: float = rules.DEFAULT_SWEEP_GRACE,
    ) -> None:
        super().__init__(
            where=table_name,
            clock=clock,
            sweep_grace=sweep_grace,
            transient_retries=transient_retries,
            sleep=sleep,
        )
        self._table = table_name
        self._db = client
        self._bodies = MessageBodies(
            s3_client, bucket, prefix=offload_prefix, threshold=offload_threshold
        )

    # -- the four primitives

    async def _get(self, key: Item, *, action: str) -> Item | None:
        response = await self._call(
            action,
            self._db.get_item,
            TableName=self._table,
            Key=codec.to_wire(key),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return None if item is None else codec.from_wire(item)

    async def _write(self, write: writes.Put | writes.Update, *, action: str) -> Written:
        request = expressions.single_write_request(self._table, write)
        operation = self._db.put_item if isinstance(write, writes.Put) else self._db.update_item
        try:
            response = await self._call(action, operation, expect=_CONDITION_FAILED, **request)
        except ClientError as exc:
            old: Any = exc.response.get("Item")
            return Written(False, codec.from_wire(old) if old else None)
        if isinstance(write, writes.Put):
            return Written(True, dict(write.item))
        return Written(True, codec.from_wire(response["Attributes"]))

    async def _transact(
        self, items: Sequence[writes.Write], *, action: str, token: str | None = None
    ) -> Cancelled | None:
        request: dict[str, Any] = {"TransactItems": expressions.transact_items(self._table, items)}
        if token is not None:
            request["ClientRequestToken"] = token
        try:
            await self._call(action, self._db.transact_write_items, expect=_CANCELLED, **request)
        except ClientError as exc:
            answered: list[Any] = list(exc.response.get("CancellationReasons", []))
            codes = parse_reason_codes(answered)
            reasons = [
                Reason(code, codec.from_wire(answer["Item"]) if answer.get("Item") else None)
                for code, answer in zip(codes, answered, strict=True)
            ]
            return Cancelled(reasons, cause=exc)
        return None

    async def _query(self, query: writes.Query, *, action: str) -> list[Item]:
        request = expressions.query_request(self._table, query)
        items: list[Item] = []
        while True:
            page = await self._call(action, self._db.query, **request)
            items.extend(codec.from_wire(item) for item in page.get("Items", []))
            if query.limit is not None or "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # -- hooks: bodies in S3, prompts cached per process

    async def _store_body(self, thread_id: str, seq: int, body: str) -> str | None:
        return await self._bodies.store(thread_id, seq, body)

    async def _read_body(self, ref: str) -> bytes:
        return await self._bodies.read(ref)

    async def _system_prompt(self, run_id: str) -> str:
        key = (self._table, run_id)
        system = SYSTEM_PROMPTS.get(key)
        if system is None:
            system = await super()._system_prompt(run_id)
            SYSTEM_PROMPTS.put(key, system)
        return system

    def _remember_prompt(self, run_id: str, system: str) -> None:
        SYSTEM_PROMPTS.put((self._table, run_id), system)

    async def _call(
        self,
        action: str,
        operation: Callable[..., Awaitable[Any]],
        *,
        expect: Collection[str] = (),
        **kwargs: Any,
    ) -> Any:
        """Send one request. A ``ClientError`` whose code is in ``expect`` is an outcome the
        caller reads (a lost condition, a cancelled transaction); every other failure leaves
        as the store's own error (:mod:`client_errors`), naming ``action`` and the table."""
        try:
            return await operation(**kwargs)
        except CLIENT_ERRORS as exc:
            if isinstance(exc, ClientError) and error_code(exc) in expect:
                raise
            raise dynamodb_error(exc, action=action, table=self._table) from exc
