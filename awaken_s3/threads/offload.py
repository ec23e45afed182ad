"""Message bodies too large for a DynamoDB item, kept in S3 (the DynamoDB store's I/O).

DynamoDB caps an item at 400 KB (names + values). A body above the threshold is written to
S3 under a key unique to the attempt *before* the transaction that references it, so a
transaction that then fails leaves at worst an orphan object, never an item pointing at a
missing body.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Final

from awaken_s3.threads.client_errors import CLIENT_ERRORS, s3_error
from awaken_s3.threads.errors import MessageTooLarge, ThreadStoreError

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

#: bodies above this many UTF-8 bytes go to S3, leaving ample room for the other attributes
DEFAULT_OFFLOAD_THRESHOLD: Final = 300 * 1024
DEFAULT_OFFLOAD_PREFIX: Final = "messages/"


class MessageBodies:
    """Where large bodies go: ``s3_client`` + ``bucket``, or nowhere (then a large message
    raises :class:`MessageTooLarge` before anything is written)."""

    def __init__(
        self,
        s3_client: S3Client | None,
        bucket: str | None,
        *,
        prefix: str = DEFAULT_OFFLOAD_PREFIX,
        threshold: int = DEFAULT_OFFLOAD_THRESHOLD,
    ) -> None:
        self._s3 = s3_client
        self._bucket = bucket
        self._prefix = prefix
        self._threshold = threshold

    async def store(self, thread_id: str, seq: int, body: str) -> str | None:
        """The S3 key ``body`` was written to, or None when it fits inline."""
        data = body.encode("utf-8")
        if len(data) <= self._threshold:
            return None
        if self._s3 is None or self._bucket is None:
            raise MessageTooLarge(
                f"message {seq} of thread {thread_id} is {len(body)} bytes, over the "
                f"{self._threshold}-byte item threshold, and no offload bucket is configured"
            )
        key = f"{self._prefix}{thread_id}/{seq:010d}-{uuid.uuid4().hex}.json"
        try:
            await self._s3.put_object(
                Bucket=self._bucket, Key=key, Body=data, ContentType="application/json"
            )
        except CLIENT_ERRORS as exc:
            raise s3_error(
                exc,
                action=f"offloading message {seq} of thread {thread_id}",
                bucket=self._bucket,
                key=key,
            ) from exc
        return key

    async def read(self, ref: str) -> bytes:
        if self._s3 is None or self._bucket is None:
            raise ThreadStoreError(f"message body offloaded to {ref} but no S3 client configured")
        try:
            obj = await self._s3.get_object(Bucket=self._bucket, Key=ref)
            async with obj["Body"] as stream:
                return await stream.read()
        except CLIENT_ERRORS as exc:
            raise s3_error(
                exc, action="reading an offloaded message", bucket=self._bucket, key=ref
            ) from exc
