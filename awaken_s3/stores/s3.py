"""Stream checkpoints in S3, fenced by conditional writes.

A thin I/O shell: every decision about what an S3 answer means lives in
:mod:`awaken_s3.stores.s3_protocol`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import aioboto3
import aiohttp
from aiobotocore.config import AioConfig
from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.errors import CheckpointCorrupt, CheckpointFenced, StreamCheckpointError
from awaken_s3.models import (
    DEFAULT_MAX_CHECKPOINT_BYTES,
    StoredCheckpoint,
    StreamCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from awaken_s3.stores import s3_protocol as proto
from awaken_s3.stores.listing import merge_bounded
from awaken_s3.stores.s3_protocol import Action

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

DEFAULT_PREFIX: Final = "checkpoints/"
DEFAULT_CONFLICT_RETRIES: Final = 5
DEFAULT_CONFLICT_BACKOFF: Final = 0.05
DEFAULT_CONFLICT_BACKOFF_CAP: Final = 1.0
#: shard listings in flight at once (see list_run_ids; benchmarks/checkpoint_listing.py)
DEFAULT_LIST_CONCURRENCY: Final = 16
#: flat listing pages read before the shards are listed side by side: 4,000 keys at most
#: cost 4 requests; past that, 258 requests in about 17 round trips beat one trip per page
FLAT_PAGES_BEFORE_SHARDS: Final = 4
#: keys per listing page: S3's maximum (smaller only to test pagination on a few keys)
DEFAULT_LIST_PAGE_SIZE: Final = 1000

# Failures below the S3 protocol: connection refused, resets, timeouts, bodies
# cut short. ClientError (an S3 error answer) is handled separately.
_TRANSPORT_ERRORS: Final = (BotoCoreError, aiohttp.ClientError, OSError, asyncio.TimeoutError)


class S3StreamCheckpointStore:
    """One JSON object per run at ``<prefix><shard>/<run_id>.json`` (the shard: two hex
    digits of sha256(run_id); a checkpoint an older build left at ``<prefix><run_id>.json``
    is read, written and deleted where it is, see :mod:`awaken_s3.stores.s3_protocol`).

    Create is ``If-None-Match: *``, replace and delete are ``If-Match: <etag>``;
    the version token is the object's ETag exactly as S3 returns it.

    Pass ``client`` to share an aiobotocore S3 client you own (the store never
    closes it), or let the store create one from ``session`` (default: a new
    ``aioboto3.Session()``) that it closes in :meth:`close` / ``async with``.
    Endpoints come from botocore's own settings (``AWS_ENDPOINT_URL``) or the
    client you pass.
    """

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        client: S3Client | None = None,
        session: aioboto3.Session | None = None,
        client_config: AioConfig | None = None,
        kms_key_id: str | None = None,
        max_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES,
        conflict_retries: int = DEFAULT_CONFLICT_RETRIES,
        conflict_backoff: float = DEFAULT_CONFLICT_BACKOFF,
        conflict_backoff_cap: float = DEFAULT_CONFLICT_BACKOFF_CAP,
        list_concurrency: int = DEFAULT_LIST_CONCURRENCY,
        list_page_size: int = DEFAULT_LIST_PAGE_SIZE,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not bucket:
            raise ValueError("bucket must not be empty")
        if client is not None and (session is not None or client_config is not None):
            raise ValueError("pass either a client or a session/client_config, not both")
        if conflict_retries < 0:
            raise ValueError("conflict_retries must be >= 0")
        if list_concurrency < 1:
            raise ValueError("list_concurrency must be >= 1")
        if not 1 <= list_page_size <= DEFAULT_LIST_PAGE_SIZE:
            raise ValueError(f"list_page_size must be within 1..{DEFAULT_LIST_PAGE_SIZE}")
        self.list_page_size = list_page_size
        self.list_concurrency = list_concurrency
        self.bucket = bucket
        self.prefix = prefix
        self.kms_key_id = kms_key_id
        self.max_bytes = max_bytes
        self.conflict_retries = conflict_retries
        self._backoff = conflict_backoff
        self._backoff_cap = conflict_backoff_cap
        self._sleep = sleep
        self._client: S3Client | None = client
        self._owns_client = client is None
        self._session = session
        self._client_config = client_config
        self._exit_stack: contextlib.AsyncExitStack | None = None
        self._client_lock = asyncio.Lock()
        self._closed = False

    def key_for(self, run_id: str) -> str:
        """The run's checkpoint key in the sharded layout (where every new one is created)."""
        return proto.object_key(self.prefix, run_id)

    def key_at(self, run_id: str, version: str) -> str:
        """The key the checkpoint read at ``version`` lives at (sharded or legacy)."""
        return proto.write_target(self.prefix, run_id, version).key

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        """The sharded object, else the legacy one an older build wrote (two GETs only when
        the sharded key is absent)."""
        found = await self._read(run_id, proto.Target(self.key_for(run_id), None, legacy=False))
        if found is None:
            legacy = proto.Target(proto.legacy_key(self.prefix, run_id), None, legacy=True)
            found = await self._read(run_id, legacy)
        return found

    async def _read(self, run_id: str, target: proto.Target) -> StoredCheckpoint | None:
        client = await self._get_client()
        try:
            response = await client.get_object(Bucket=self.bucket, Key=target.key)
            version = proto.tag_version(target, response["ETag"])
            length = response.get("ContentLength")
            async with response["Body"] as stream:
                # Refuse a runaway object before buffering it.
                if length is not None and length > self.max_bytes:
                    raise CheckpointCorrupt(
                        f"stored checkpoint for run {run_id} is {length} bytes, "
                        f"over the {self.max_bytes} limit",
                        run_id=run_id,
                        version=version,
                    )
                body = await stream.read()
        except ClientError as exc:
            if proto.get_action(exc.response) is Action.ABSENT:
                return None
            raise self._failure("get", run_id, exc) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._failure("get", run_id, exc) from exc
        checkpoint = decode_checkpoint(
            body, run_id=run_id, max_bytes=self.max_bytes, version=version
        )
        return StoredCheckpoint(checkpoint=checkpoint, version=version)

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        run_id = checkpoint.run_id
        target = proto.write_target(self.prefix, run_id, expected_version)
        body = encode_checkpoint(checkpoint, max_bytes=self.max_bytes)
        params = proto.put_params(
            bucket=self.bucket,
            key=target.key,
            body=body,
            expected_version=target.etag,
            kms_key_id=self.kms_key_id,
        )
        client = await self._get_client()
        attempt = 0
        while True:
            try:
                response = await client.put_object(**params)
            except ClientError as exc:
                action = proto.put_action(exc.response, replacing=target.etag is not None)
                if action is Action.FENCED:
                    if proto.was_retried(exc.response):
                        landed = await self._own_write_version(run_id, target.key, body)
                        if landed is not None:
                            return proto.tag_version(target, landed)
                    raise self._fenced(run_id, expected_version) from exc
                if action is Action.RETRY and attempt < self.conflict_retries:
                    await self._sleep(self._delay(attempt))
                    attempt += 1
                    continue
                raise self._failure("put", run_id, exc, attempts=attempt + 1) from exc
            except _TRANSPORT_ERRORS as exc:
                raise self._failure("put", run_id, exc) from exc
            return proto.tag_version(target, response["ETag"])

    async def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        """Conditional on ``expected_version`` at the key it was read from; see
        :func:`~awaken_s3.stores.s3_protocol.delete_targets` for the legacy object."""
        for target in proto.delete_targets(self.prefix, run_id, expected_version):
            await self._delete_one(run_id, target, expected_version)
        leftover = proto.legacy_leftover(self.prefix, run_id, expected_version)
        if leftover is not None:
            await self._clear_leftover(run_id, leftover)

    async def _clear_leftover(self, run_id: str, key: str) -> None:
        etag = await self._etag(run_id, key)
        if etag is None:
            return
        target = proto.Target(key, etag, legacy=True)
        with contextlib.suppress(CheckpointFenced):  # rewritten since the HEAD: the sweeper's
            await self._delete_one(run_id, target, proto.legacy_version(etag))

    async def _delete_one(
        self, run_id: str, target: proto.Target, expected_version: str | None
    ) -> None:
        params = proto.delete_params(
            bucket=self.bucket, key=target.key, expected_version=target.etag
        )
        client = await self._get_client()
        attempt = 0
        while True:
            try:
                await client.delete_object(**params)
                return
            except ClientError as exc:
                action = proto.delete_action(exc.response, conditional=target.etag is not None)
                if action is Action.PROBE:
                    action = proto.probe_action(exists=await self._exists(run_id, target.key))
                if action is Action.ABSENT:
                    return
                if action is Action.FENCED:
                    raise self._fenced(run_id, expected_version) from exc
                if action is Action.RETRY and attempt < self.conflict_retries:
                    await self._sleep(self._delay(attempt))
                    attempt += 1
                    continue
                raise self._failure("delete", run_id, exc, attempts=attempt + 1) from exc
            except _TRANSPORT_ERRORS as exc:
                raise self._failure("delete", run_id, exc) from exc

    async def list_run_ids(self, *, modified_before: datetime | None = None) -> AsyncIterator[str]:
        """Run ids with a checkpoint under the prefix, in either layout, each once; with
        ``modified_before``, only objects last written before then (the listing carries
        ``LastModified``, so nothing more is read to filter).

        The first pages (:data:`FLAT_PAGES_BEFORE_SHARDS`) of a flat listing of the whole
        prefix find both layouts; when there is more, with ``list_concurrency`` above 1 the
        256 shards are listed side by side (at most that many paginated ``ListObjectsV2`` at
        once) beside one delimited listing of the legacy keys, and with 1 the flat listing
        goes on page by page. A run found twice (in the first pages, then in its shard; or in
        both layouts) is named once.
        """
        seen: set[str] = set()
        try:
            async for key, written in self._listed_keys():
                if modified_before is not None and written >= modified_before:
                    continue
                run_id = proto.run_id_from_key(self.prefix, key)
                if run_id is not None and run_id not in seen:
                    seen.add(run_id)
                    yield run_id
        except ClientError as exc:
            raise self._list_failure(proto.describe(exc.response)) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._list_failure(type(exc).__name__) from exc

    async def _listed_keys(self) -> AsyncIterator[tuple[str, datetime]]:
        # Flat pages first: a bucket that fits in a few (every small deployment, most sweeps)
        # costs that few requests, not 258. Past them, the shards are listed side by side:
        # 258 requests, but about 258 / list_concurrency round trips instead of one per page.
        client = await self._get_client()
        token: str | None = None
        for _ in range(FLAT_PAGES_BEFORE_SHARDS):
            options: dict[str, Any] = {"ContinuationToken": token} if token else {}
            page = await client.list_objects_v2(
                Bucket=self.bucket, Prefix=self.prefix, MaxKeys=self.list_page_size, **options
            )
            for item in page.get("Contents", ()):
                yield item["Key"], item["LastModified"]
            if not page.get("IsTruncated"):
                return
            token = page["NextContinuationToken"]
        if self.list_concurrency <= 1:
            async for entry in self._list_pages(self.prefix, delimiter=None, after=token):
                yield entry
            return
        listings = [self._list_pages(self.prefix, delimiter="/")]
        listings += [self._list_pages(p, delimiter=None) for p in proto.shard_prefixes(self.prefix)]
        async for entry in merge_bounded(listings, self.list_concurrency):
            yield entry

    async def _list_pages(
        self, prefix: str, *, delimiter: str | None, after: str | None = None
    ) -> AsyncIterator[tuple[str, datetime]]:
        client = await self._get_client()
        paginator = client.get_paginator("list_objects_v2")
        options: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": prefix,
            "PaginationConfig": {"PageSize": self.list_page_size},
        }
        if delimiter is not None:
            options["Delimiter"] = delimiter
        if after is not None:
            options["ContinuationToken"] = after
        async for page in paginator.paginate(**options):
            for item in page.get("Contents", ()):
                yield item["Key"], item["LastModified"]

    def _list_failure(self, detail: str) -> StreamCheckpointError:
        return StreamCheckpointError(
            f"S3 list of checkpoints in s3://{self.bucket}/{self.prefix} failed: {detail}"
        )

    async def close(self) -> None:
        """Close the client the store created; a client passed in stays open."""
        self._closed = True
        stack, self._exit_stack = self._exit_stack, None
        if stack is not None:
            self._client = None
            await stack.aclose()

    async def aclose(self) -> None:
        """Same as :meth:`close`; every store that holds resources has ``aclose``."""
        await self.close()

    async def __aenter__(self) -> S3StreamCheckpointStore:
        await self._get_client()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _get_client(self) -> S3Client:
        if self._closed:
            raise StreamCheckpointError("S3 checkpoint store is closed")
        if self._client is not None:
            return self._client
        async with self._client_lock:
            if self._client is None:
                session = self._session or aioboto3.Session()
                stack = contextlib.AsyncExitStack()
                client: S3Client = await stack.enter_async_context(
                    session.client("s3", config=self._client_config)
                )
                self._exit_stack = stack
                self._client = client
            return self._client

    async def _exists(self, run_id: str, key: str) -> bool:
        return await self._etag(run_id, key) is not None

    async def _etag(self, run_id: str, key: str) -> str | None:
        """The object's ETag from a HEAD; None when it is absent."""
        client = await self._get_client()
        try:
            response = await client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if proto.head_action(exc.response) is Action.ABSENT:
                return None
            raise self._failure("delete", run_id, exc) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._failure("delete", run_id, exc) from exc
        return str(response["ETag"])

    async def _own_write_version(self, run_id: str, key: str, body: bytes) -> str | None:
        """The ETag of the stored object if it holds exactly ``body``, else None.

        Bodies carry the writer id, epoch and a timestamp, so byte equality
        means this writer's earlier attempt landed; comparing bytes rather than
        MD5 ETags also holds under SSE-KMS, whose ETags are not MD5s.
        """
        client = await self._get_client()
        try:
            response = await client.get_object(Bucket=self.bucket, Key=key)
            async with response["Body"] as stream:
                if response.get("ContentLength", len(body)) != len(body):
                    return None
                stored = await stream.read()
        except ClientError as exc:
            if proto.get_action(exc.response) is Action.ABSENT:
                return None
            raise self._failure("put", run_id, exc) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._failure("put", run_id, exc) from exc
        return response["ETag"] if stored == body else None

    def _delay(self, attempt: int) -> float:
        return proto.backoff_delay(
            attempt, base=self._backoff, cap=self._backoff_cap, jitter=random.random()
        )

    def _fenced(self, run_id: str, expected_version: str | None) -> CheckpointFenced:
        if expected_version is None:
            message = f"checkpoint for run {run_id} already exists in s3://{self.bucket}"
        else:
            message = (
                f"checkpoint for run {run_id} in s3://{self.bucket} is no longer at "
                f"version {expected_version}"
            )
        return CheckpointFenced(message, run_id=run_id)

    def _failure(
        self, operation: str, run_id: str, exc: Exception, *, attempts: int = 1
    ) -> StreamCheckpointError:
        detail = (
            proto.describe(exc.response) if isinstance(exc, ClientError) else type(exc).__name__
        )
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        return StreamCheckpointError(
            f"S3 {operation} of checkpoint for run {run_id} in s3://{self.bucket} "
            f"failed{tries}: {detail}",
            run_id=run_id,
        )
