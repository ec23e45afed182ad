"""ThreadStore over one DynamoDB table (aioboto3/aiobotocore), with S3 offload of big messages.

A thin shell: keys and items come from :mod:`codec`, the meaning of a cancelled commit from
:mod:`cancellation`. Every write that decides a run's fate carries its condition, so the table
itself fences a stale worker.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Literal

from aiobotocore.config import AioConfig
from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.ids import validate_run_id, validate_thread_id
from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import codec, rules
from awaken_s3.threads import expressions as expr
from awaken_s3.threads.cancellation import (
    ItemReason,
    StoredMessage,
    Verdict,
    diagnose_commit,
    parse_reason_codes,
)
from awaken_s3.threads.codec import n_attr, s_attr
from awaken_s3.threads.errors import (
    CommitFenced,
    LeaseLost,
    LeaseUnavailable,
    MessageTooLarge,
    RunActive,
    RunChanged,
    RunExists,
    RunNotFound,
    ThreadExists,
    ThreadMovedOn,
    ThreadNotFound,
    ThreadStoreError,
    ToolCallConflict,
)
from awaken_s3.threads.models import (
    CommitResult,
    RunSettings,
    RunState,
    RunStatus,
    Thread,
    ToolCallRecord,
    ToolCallStatus,
    TurnCommit,
)

logger = logging.getLogger("awaken_s3.threads")

# DynamoDB caps an item at 400 KB (names + values). Bodies above this go to S3, leaving ample
# room for the other attributes and for UTF-8 growth estimates.
DEFAULT_OFFLOAD_THRESHOLD: Final = 300 * 1024
DEFAULT_OFFLOAD_PREFIX: Final = "messages/"
# Error codes after which the same conditional request may be sent again: either it did not
# apply, or it did and its condition now recognises it (the commit id), so no duplicate.
_TRANSIENT_ERRORS: Final = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionInProgressException",
        "LimitExceededException",
    }
)


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


async def create_table(client: Any, table_name: str) -> None:
    """Create the on-demand table (tests, local servers; production uses template.yaml)."""
    await client.create_table(TableName=table_name, **expr.table_definition())


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class _RunEnded(ThreadStoreError):
    def __init__(self, run: RunState) -> None:
        super().__init__(f"run {run.run_id} is {run.status.value}")
        self.run = run


def _request_token(commit_id: str) -> str:
    # DynamoDB's idempotency token (<= 36 chars): a retried identical commit within its window
    # is acknowledged without being applied twice.
    return hashlib.sha256(commit_id.encode()).hexdigest()[:36]


class DynamoThreadStore:
    """``client`` is an aiobotocore DynamoDB client the caller owns (build it with
    :func:`dynamodb_client_config`). ``s3_client`` + ``bucket`` enable offloading messages
    whose body exceeds ``offload_threshold`` bytes; without them such a message raises
    :class:`MessageTooLarge` before any write.
    """

    def __init__(
        self,
        table_name: str,
        *,
        client: Any,
        s3_client: Any | None = None,
        bucket: str | None = None,
        offload_prefix: str = DEFAULT_OFFLOAD_PREFIX,
        offload_threshold: int = DEFAULT_OFFLOAD_THRESHOLD,
        clock: Callable[[], float] = time.time,
        transient_retries: int = 5,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        sweep_grace: float = rules.DEFAULT_SWEEP_GRACE,
    ) -> None:
        self._table = table_name
        self._grace = sweep_grace
        self._db = client
        self._s3 = s3_client
        self._bucket = bucket
        self._prefix = offload_prefix
        self._threshold = offload_threshold
        self._clock = clock
        self._retries = transient_retries
        self._sleep = sleep

    # -- threads and messages

    async def create_thread(
        self, thread_id: str, *, owner: str, metadata: Mapping[str, str] | None = None
    ) -> Thread:
        validate_thread_id(thread_id)
        thread = Thread(thread_id, owner, 0, self._clock(), dict(metadata or {}))
        try:
            await self._db.put_item(
                TableName=self._table,
                Item=codec.thread_item(thread),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                raise ThreadExists(f"thread {thread_id} already exists") from exc
            raise ThreadStoreError(f"create_thread {thread_id}: {exc}") from exc
        return thread

    async def get_thread(self, thread_id: str, *, owner: str | None = None) -> Thread:
        validate_thread_id(thread_id)
        item = await self._get_item(codec.thread_key(thread_id))
        if item is None:
            raise ThreadNotFound(f"thread {thread_id} not found")
        thread = codec.decode_thread(item)
        if owner is not None and thread.owner != owner:
            raise ThreadNotFound(f"thread {thread_id} not found")
        return thread

    async def load_messages(self, thread_id: str) -> list[Message]:
        await self.get_thread(thread_id)
        messages: list[Message] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :msg)",
            "ExpressionAttributeValues": {
                ":pk": s_attr(codec.thread_pk(thread_id)),
                ":msg": s_attr(codec.MSG_PREFIX),
            },
            "ConsistentRead": True,
        }
        while True:
            page = await self._call(self._db.query, **kwargs)
            for item in page.get("Items", []):
                stored = await self._decode_message(item)
                assert stored.message is not None
                messages.append(stored.message)
            if "LastEvaluatedKey" not in page:
                return messages
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    async def _decode_message(self, item: Mapping[str, Any]) -> StoredMessage:
        ref = codec.message_body_ref(item)
        if ref is None:
            return codec.decode_stored_message(item)
        if self._s3 is None or self._bucket is None:
            raise ThreadStoreError(f"message body offloaded to {ref} but no S3 client configured")
        try:
            obj = await self._s3.get_object(Bucket=self._bucket, Key=ref)
            async with obj["Body"] as stream:
                body = await stream.read()
        except (ClientError, BotoCoreError) as exc:
            raise ThreadStoreError(f"reading offloaded message {ref}: {exc}") from exc
        return codec.decode_stored_message(item, body=body)

    async def _message_items(
        self, thread_id: str, start: int, messages: Sequence[Message], commit_id: str
    ) -> list[dict[str, Any]]:
        """Items for ``messages``; offloaded bodies are written first, under unique keys, so a
        transaction that then fails leaves an orphan object, never a dangling reference."""
        now = self._clock()
        items = []
        for offset, message in enumerate(messages):
            seq = start + offset
            body: str | None = codec.encode_content(message)
            ref = None
            if body is not None and len(body.encode("utf-8")) > self._threshold:
                ref = await self._offload(thread_id, seq, body)
                body = None
            items.append(
                codec.message_item(
                    thread_id, seq, message, commit_id=commit_id, now=now, body=body, body_ref=ref
                )
            )
        return items

    async def _offload(self, thread_id: str, seq: int, body: str) -> str:
        if self._s3 is None or self._bucket is None:
            raise MessageTooLarge(
                f"message {seq} of thread {thread_id} is {len(body)} bytes, over the "
                f"{self._threshold}-byte item threshold, and no offload bucket is configured"
            )
        key = f"{self._prefix}{thread_id}/{seq:010d}-{uuid.uuid4().hex}.json"
        try:
            await self._s3.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=body.encode("utf-8"),
                ContentType="application/json",
            )
        except (ClientError, BotoCoreError) as exc:
            raise ThreadStoreError(f"offloading message {seq} of {thread_id}: {exc}") from exc
        return key

    # -- runs

    async def create_run(
        self,
        run_id: str,
        *,
        thread_id: str,
        owner: str,
        settings: RunSettings,
        messages: Sequence[Message] = (),
    ) -> RunState:
        validate_run_id(run_id)
        thread = await self.get_thread(thread_id, owner=owner)
        if thread.active_run is not None and thread.active_run != run_id:
            try:
                active: RunState | None = await self.get_run(thread.active_run)
            except RunNotFound:
                active = None
            if rules.active_run_blocks(active, run_id):
                raise RunActive(
                    f"thread {thread_id} has an active run {thread.active_run}",
                    run_id=thread.active_run,
                )
        now = self._clock()
        count = thread.message_count + len(messages)
        digest = rules.run_request_digest(settings, messages)
        run = RunState(
            run_id=run_id,
            thread_id=thread_id,
            owner=owner,
            settings=settings,
            message_count=count,
            created_at=now,
            updated_at=now,
            sweep_at=now + self._grace,
            request_digest=digest,
        )
        items = await self._message_items(
            thread_id, thread.message_count, messages, f"create/{run_id}"
        )
        transact: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": codec.run_item(run),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            *(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": item,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
                for item in items
            ),
            expr.create_run_thread_update(
                self._table,
                thread_id,
                owner=owner,
                run_id=run_id,
                old_count=thread.message_count,
                new_count=count,
                previous_active=thread.active_run,
            ),
        ]
        try:
            await self._call(self._db.transact_write_items, TransactItems=transact)
        except ClientError as exc:
            if _code(exc) != "TransactionCanceledException":
                raise ThreadStoreError(f"create_run {run_id}: {exc}") from exc
            codes = parse_reason_codes(exc.response.get("CancellationReasons", []))
            if codes and codes[0] == "ConditionalCheckFailed":
                existing = await self.get_run(run_id)
                if rules.same_run_request(
                    existing,
                    thread_id=thread_id,
                    owner=owner,
                    settings=settings,
                    request_digest=digest,
                ):
                    return existing
                raise RunExists(f"run {run_id} already exists") from exc
            raise ThreadMovedOn(f"thread {thread_id} changed while creating run {run_id}") from exc
        return run

    async def get_run(self, run_id: str) -> RunState:
        validate_run_id(run_id)
        item = await self._get_item(codec.run_key(run_id))
        if item is None:
            raise RunNotFound(f"run {run_id} not found")
        return codec.decode_run(item)

    async def claim_run(self, run_id: str, *, worker: str, lease_seconds: float) -> RunState:
        validate_run_id(run_id)
        now = self._clock()
        try:
            response = await self._call(
                self._db.update_item,
                **expr.claim_update(
                    self._table,
                    run_id,
                    worker=worker,
                    now=now,
                    lease_seconds=lease_seconds,
                    sweep_grace=self._grace,
                ),
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise ThreadStoreError(f"claim_run {run_id}: {exc}") from exc
            old: Any = exc.response.get("Item")
            if not old:
                raise RunNotFound(f"run {run_id} not found") from exc
            current = codec.decode_run(old)
            raise LeaseUnavailable(
                f"run {run_id} is {current.status.value}, leased by {current.lease.owner!r} "
                f"until {current.lease.lease_until:.3f}"
            ) from exc
        return codec.decode_run(response["Attributes"])

    async def _update_leased(
        self,
        run_id: str,
        request: dict[str, Any],
        *,
        worker: str,
        epoch: int,
        applied: Callable[[RunState], bool] | None = None,
    ) -> RunState:
        """An ``UpdateItem`` that holds only while ``worker`` at ``epoch`` holds the lease.

        When the lease still holds but another part of the condition failed (the run ended),
        raises :class:`_RunEnded` with the stored run.
        """
        try:
            response = await self._call(self._db.update_item, **request)
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise ThreadStoreError(f"update of run {run_id}: {exc}") from exc
            old: Any = exc.response.get("Item")
            if not old:
                raise RunNotFound(f"run {run_id} not found") from exc
            current = codec.decode_run(old)
            if rules.holds_lease(current, worker, epoch):
                raise _RunEnded(current) from exc
            if applied is not None and applied(current):
                return current  # an earlier attempt whose response was lost did it
            raise LeaseLost(
                f"run {run_id} is leased by {current.lease.owner!r} at epoch "
                f"{current.lease.epoch}, not {worker!r} at {epoch}"
            ) from exc
        return codec.decode_run(response["Attributes"])

    async def renew_lease(
        self, run_id: str, *, worker: str, epoch: int, lease_seconds: float
    ) -> RunState:
        validate_run_id(run_id)
        request = expr.renew_update(
            self._table,
            run_id,
            worker=worker,
            epoch=epoch,
            now=self._clock(),
            lease_seconds=lease_seconds,
            sweep_grace=self._grace,
        )
        return await self._update_leased(run_id, request, worker=worker, epoch=epoch)

    async def release_lease(
        self,
        run_id: str,
        *,
        worker: str,
        epoch: int,
        status: RunStatus = RunStatus.SUSPENDED,
        idle_suspensions: int = 0,
    ) -> RunState:
        validate_run_id(run_id)
        request = expr.release_update(
            self._table,
            run_id,
            worker=worker,
            epoch=epoch,
            now=self._clock(),
            status=status,
            idle_suspensions=idle_suspensions,
            sweep_grace=self._grace,
        )
        try:
            return await self._update_leased(
                run_id,
                request,
                worker=worker,
                epoch=epoch,
                applied=lambda run: rules.release_applied(run, epoch=epoch, status=status),
            )
        except _RunEnded:
            # The run ended meanwhile (a cancel): keep that status, just let the lease go.
            return await self._drop_lease(run_id, worker=worker, epoch=epoch)

    async def _drop_lease(self, run_id: str, *, worker: str, epoch: int) -> RunState:
        request = expr.drop_lease_update(
            self._table, run_id, worker=worker, epoch=epoch, now=self._clock()
        )
        return await self._update_leased(run_id, request, worker=worker, epoch=epoch)

    async def finish_run(
        self,
        run_id: str,
        *,
        worker: str,
        epoch: int,
        status: RunStatus,
        error: ClassifiedError | None = None,
    ) -> RunState:
        validate_run_id(run_id)
        request = expr.finish_update(
            self._table,
            run_id,
            worker=worker,
            epoch=epoch,
            now=self._clock(),
            status=status,
            error=error,
        )
        try:
            return await self._update_leased(
                run_id,
                request,
                worker=worker,
                epoch=epoch,
                applied=lambda run: rules.release_applied(run, epoch=epoch, status=status),
            )
        except _RunEnded as ended:
            # Already terminal (cancelled by the API): that outcome stands; drop the lease.
            if ended.run.lease.owner is None:
                return ended.run
            return await self._drop_lease(run_id, worker=worker, epoch=epoch)

    async def cancel_run(self, run_id: str) -> RunState:
        validate_run_id(run_id)
        try:
            response = await self._call(
                self._db.update_item, **expr.cancel_update(self._table, run_id, now=self._clock())
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise ThreadStoreError(f"cancel_run {run_id}: {exc}") from exc
            old: Any = exc.response.get("Item")
            if not old:
                raise RunNotFound(f"run {run_id} not found") from exc
            return codec.decode_run(old)
        return codec.decode_run(response["Attributes"])

    # -- the turn commit

    async def commit_turn(self, commit: TurnCommit) -> CommitResult:
        items = await self._message_items(
            commit.thread_id, commit.expected_message_count, commit.messages, commit.commit_id
        )
        transact = expr.commit_transaction(self._table, commit, items, now=self._clock())
        attempt = 0
        while True:
            try:
                await self._db.transact_write_items(
                    TransactItems=transact,
                    ClientRequestToken=_request_token(commit.commit_id),
                )
                return CommitResult(rules.apply_commit(commit, now=self._clock()))
            except ClientError as exc:
                code = _code(exc)
                if code == "TransactionCanceledException":
                    verdict, detail = await self._diagnose(commit, exc)
                elif code in _TRANSIENT_ERRORS:
                    verdict, detail = Verdict.RETRY, code
                else:
                    raise ThreadStoreError(f"commit of run {commit.run_id}: {exc}") from exc
                if verdict == Verdict.DUPLICATE:
                    logger.info("commit %s had already landed: %s", commit.commit_id, detail)
                    return CommitResult(await self.get_run(commit.run_id), duplicate=True)
                if verdict == Verdict.FENCED:
                    raise CommitFenced(detail) from exc
                if verdict == Verdict.MOVED_ON:
                    raise ThreadMovedOn(detail) from exc
                if verdict == Verdict.ERROR or attempt >= self._retries:
                    raise ThreadStoreError(
                        f"commit of run {commit.run_id} failed: {detail}"
                    ) from exc
            except BotoCoreError as exc:
                # Connection dropped or timed out after botocore's own retries: the commit may
                # or may not have landed. Re-sending is safe: its conditions recognise it.
                if attempt >= self._retries:
                    raise ThreadStoreError(f"commit of run {commit.run_id}: {exc}") from exc
            attempt += 1
            await self._sleep(min(0.05 * 2**attempt, 2.0))

    async def _diagnose(self, commit: TurnCommit, exc: ClientError) -> tuple[Verdict, str]:
        reasons = list(exc.response.get("CancellationReasons", []))
        codes = parse_reason_codes(reasons)
        n = len(commit.messages)
        if len(reasons) != n + 2:
            return Verdict.ERROR, f"unexpected cancellation reasons {codes}"
        message_reasons = []
        for reason, code in zip(reasons[:n], codes[:n], strict=True):
            item = reason.get("Item")
            existing = await self._decode_message(item) if item else None
            message_reasons.append(ItemReason(code, existing))
        run_item = reasons[n].get("Item")
        diagnosis = diagnose_commit(
            commit,
            messages=message_reasons,
            run=ItemReason(codes[n], codec.decode_run(run_item) if run_item else None),
            thread=ItemReason(codes[n + 1]),
        )
        return diagnosis.verdict, diagnosis.detail

    # -- tool calls

    async def claim_tool_call(
        self, run_id: str, tool_use_id: str, *, name: str, epoch: int
    ) -> tuple[ToolCallRecord, bool]:
        record = ToolCallRecord(run_id, tool_use_id, name, ToolCallStatus.CLAIMED, epoch)
        put = {
            "Put": {
                "TableName": self._table,
                "Item": codec.tool_item(record),
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        reasons = await self._with_lease_check(run_id, epoch, put)
        if reasons is None:
            return record, True
        item = reasons[1].get("Item")
        if item:
            return codec.decode_tool(item), False
        existing = await self.get_tool_call(run_id, tool_use_id)
        if existing is None:
            raise ThreadStoreError(f"claim of tool call {tool_use_id} failed: {reasons}")
        return existing, False

    async def reclaim_tool_call(
        self, run_id: str, tool_use_id: str, *, epoch: int, previous_epoch: int
    ) -> ToolCallRecord:
        update = {
            "Update": {
                "TableName": self._table,
                "Key": codec.tool_key(run_id, tool_use_id),
                "UpdateExpression": "SET epoch = :mine, attempts = attempts + :one",
                "ConditionExpression": "#status = :claimed AND epoch = :prev",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":mine": n_attr(epoch),
                    ":one": n_attr(1),
                    ":claimed": s_attr(ToolCallStatus.CLAIMED.value),
                    ":prev": n_attr(previous_epoch),
                },
            }
        }
        if await self._with_lease_check(run_id, epoch, update) is not None:
            current = await self.get_tool_call(run_id, tool_use_id)
            if current is not None and rules.tool_reclaim_applied(current, epoch=epoch):
                return current
            raise ToolCallConflict(
                f"tool call {tool_use_id} is no longer held by epoch {previous_epoch}"
            )
        record = await self.get_tool_call(run_id, tool_use_id)
        assert record is not None
        return record

    async def _with_lease_check(
        self, run_id: str, epoch: int, operation: dict[str, Any]
    ) -> list[Mapping[str, Any]] | None:
        """Run ``operation`` only while ``epoch`` holds the run. None when it applied, else the
        cancellation reasons of the operation (LeaseLost is raised for a lost lease)."""
        check = {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": codec.run_key(run_id),
                "ConditionExpression": "epoch = :epoch",
                "ExpressionAttributeValues": {":epoch": n_attr(epoch)},
            }
        }
        try:
            await self._call(self._db.transact_write_items, TransactItems=[check, operation])
        except ClientError as exc:
            if _code(exc) != "TransactionCanceledException":
                raise ThreadStoreError(f"tool call on run {run_id}: {exc}") from exc
            reasons: list[Mapping[str, Any]] = list(exc.response.get("CancellationReasons", []))
            codes = parse_reason_codes(reasons)
            if codes and codes[0] == "ConditionalCheckFailed":
                raise LeaseLost(f"run {run_id} is no longer at epoch {epoch}") from exc
            if len(codes) > 1 and codes[1] == "ConditionalCheckFailed":
                return reasons
            raise ThreadStoreError(f"tool call on run {run_id} cancelled: {codes}") from exc
        return None

    async def finish_tool_call(
        self, run_id: str, tool_use_id: str, *, epoch: int, content: str, is_error: bool
    ) -> ToolCallRecord:
        try:
            response = await self._call(
                self._db.update_item,
                TableName=self._table,
                Key=codec.tool_key(run_id, tool_use_id),
                UpdateExpression="SET #status = :finished, content = :content, is_error = :err",
                ConditionExpression="#status = :claimed AND epoch = :epoch",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":finished": s_attr(ToolCallStatus.FINISHED.value),
                    ":content": s_attr(content),
                    ":err": {"BOOL": is_error},
                    ":claimed": s_attr(ToolCallStatus.CLAIMED.value),
                    ":epoch": n_attr(epoch),
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                old: Any = exc.response.get("Item")
                current = codec.decode_tool(old) if old else None
                if current is not None and rules.tool_finish_applied(
                    current, epoch=epoch, content=content, is_error=is_error
                ):
                    return current
                raise ToolCallConflict(
                    f"tool call {tool_use_id} is not held by epoch {epoch}"
                ) from exc
            raise ThreadStoreError(f"finish of tool call {tool_use_id}: {exc}") from exc
        return codec.decode_tool(response["Attributes"])

    async def get_tool_call(self, run_id: str, tool_use_id: str) -> ToolCallRecord | None:
        item = await self._get_item(codec.tool_key(run_id, tool_use_id))
        return None if item is None else codec.decode_tool(item)

    # -- the sweeper

    async def stalled_runs(self, *, now: float, limit: int = 100) -> list[str]:
        run_ids: list[str] = []
        for shard in range(rules.SWEEP_SHARDS):
            if len(run_ids) >= limit:
                break
            try:
                page = await self._call(
                    self._db.query,
                    **expr.stalled_query(
                        self._table, str(shard), now=now, limit=limit - len(run_ids)
                    ),
                )
            except ClientError as exc:
                raise ThreadStoreError(f"query of the sweep index: {exc}") from exc
            for item in page.get("Items", []):
                run_ids.append(str(item["pk"]["S"]).removeprefix("RUN#"))
        return run_ids

    async def mark_rescued(self, run: RunState, *, rescues: int, now: float) -> RunState:
        request = expr.rescue_update(
            self._table, run, rescues=rescues, now=now, sweep_grace=self._grace
        )
        return await self._sweep_write(run, request)

    async def abandon_run(self, run: RunState, *, error: ClassifiedError, now: float) -> RunState:
        return await self._sweep_write(
            run, expr.abandon_update(self._table, run, error=error, now=now)
        )

    async def _sweep_write(self, run: RunState, request: dict[str, Any]) -> RunState:
        try:
            response = await self._call(self._db.update_item, **request)
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                raise RunChanged(f"run {run.run_id} changed since the sweeper read it") from exc
            raise ThreadStoreError(f"sweep of run {run.run_id}: {exc}") from exc
        return codec.decode_run(response["Attributes"])

    # -- plumbing

    async def _get_item(self, key: dict[str, Any]) -> dict[str, Any] | None:
        response = await self._call(
            self._db.get_item, TableName=self._table, Key=key, ConsistentRead=True
        )
        item: dict[str, Any] | None = response.get("Item")
        return item

    async def _call(self, operation: Callable[..., Awaitable[Any]], **kwargs: Any) -> Any:
        try:
            return await operation(**kwargs)
        except ClientError:
            raise
        except BotoCoreError as exc:
            raise ThreadStoreError(f"DynamoDB unreachable: {exc}") from exc
