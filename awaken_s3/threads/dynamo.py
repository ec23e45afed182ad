"""The thread store over one DynamoDB table (aiobotocore), with S3 offload of big messages.

:class:`DynamoThreadStore` implements every contract of :mod:`awaken_s3.threads.base`
(``RunStore``, ``ToolCallLedger``, ``RunSweepStore``) in one class: runs, their tool calls
and the sweep index live in one table, and a tool-call claim is a transaction with a
condition on the run item.

A thin shell: keys and items come from :mod:`codec`, the meaning of a cancelled commit from
:mod:`cancellation`. Every write that decides a run's fate carries its condition, so the table
itself fences a stale worker.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from aiobotocore.config import AioConfig
from botocore.exceptions import ClientError

from awaken_s3.ids import validate_run_id, validate_thread_id
from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import codec, rules
from awaken_s3.threads import expressions as expr
from awaken_s3.threads.cancellation import (
    CONDITION_FAILED,
    ItemReason,
    StoredMessage,
    Verdict,
    diagnose_commit,
    parse_reason_codes,
    transient_cancellation,
)
from awaken_s3.threads.client_errors import (
    CLIENT_ERRORS,
    cancelled_error,
    dynamodb_error,
    error_code,
    s3_error,
)
from awaken_s3.threads.errors import (
    CommitFenced,
    LeaseLost,
    LeaseUnavailable,
    MessageTooLarge,
    RunActive,
    RunChanged,
    RunExists,
    RunNotFound,
    StoreUnavailable,
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

if TYPE_CHECKING:
    # Stubs only: the clients are whatever aiobotocore session the caller opened.
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_s3 import S3Client

logger = logging.getLogger("awaken_s3.threads")

# DynamoDB caps an item at 400 KB (names + values). Bodies above this go to S3, leaving ample
# room for the other attributes and for UTF-8 growth estimates.
DEFAULT_OFFLOAD_THRESHOLD: Final = 300 * 1024
DEFAULT_OFFLOAD_PREFIX: Final = "messages/"
_CONDITION_FAILED: Final = ("ConditionalCheckFailedException",)
_CANCELLED: Final = ("TransactionCanceledException",)
# Error codes after which the same commit may be sent again: either it did not apply, or it
# did and its conditions now recognise it (the commit id), so no duplicate.
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


async def create_table(client: DynamoDBClient, table_name: str) -> None:
    """Create the on-demand table (tests, local servers; production uses template.yaml)."""
    await client.create_table(TableName=table_name, **expr.table_definition())


class _SystemPrompts:
    """System prompts kept apart from their run items, by (table, run id), shared by every
    store of the process: a settings item is written once with its run and never changed, so
    a prompt read once serves every later decode of that run's item (the worker's claim,
    renewals and re-reads, the API's polls), bounded by the bytes held."""

    def __init__(self, max_bytes: int = 4 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._held = 0
        self._prompts: OrderedDict[tuple[str, str], str] = OrderedDict()
        # Stores on several threads' loops may share it (tests, local servers).
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> str | None:
        with self._lock:
            prompt = self._prompts.get(key)
            if prompt is not None:
                self._prompts.move_to_end(key)
            return prompt

    def put(self, key: tuple[str, str], prompt: str) -> None:
        with self._lock:
            if key in self._prompts or len(prompt) > self.max_bytes:
                return
            self._prompts[key] = prompt
            self._held += len(prompt)
            while self._held > self.max_bytes:
                _, dropped = self._prompts.popitem(last=False)
                self._held -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._prompts.clear()
            self._held = 0


_SYSTEM_PROMPTS = _SystemPrompts()


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
            await self._call(
                f"create_thread {thread_id}",
                self._db.put_item,
                expect=_CONDITION_FAILED,
                **expr.create_thread_put(self._table, thread),
            )
        except ClientError as exc:
            raise ThreadExists(f"thread {thread_id} already exists") from exc
        return thread

    async def get_thread(self, thread_id: str, *, owner: str | None = None) -> Thread:
        validate_thread_id(thread_id)
        item = await self._get_item(f"get_thread {thread_id}", codec.thread_key(thread_id))
        if item is None:
            raise ThreadNotFound(f"thread {thread_id} not found")
        thread = codec.decode_thread(item)
        if owner is not None and thread.owner != owner:
            raise ThreadNotFound(f"thread {thread_id} not found")
        return thread

    async def load_messages(self, thread_id: str) -> list[Message]:
        validate_thread_id(thread_id)
        messages: list[Message] = []
        kwargs = expr.messages_query(self._table, thread_id)
        while True:
            page = await self._call(f"load_messages {thread_id}", self._db.query, **kwargs)
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
        except CLIENT_ERRORS as exc:
            raise s3_error(
                exc, action="reading an offloaded message", bucket=self._bucket, key=ref
            ) from exc
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
        except CLIENT_ERRORS as exc:
            raise s3_error(
                exc,
                action=f"offloading message {seq} of thread {thread_id}",
                bucket=self._bucket,
                key=key,
            ) from exc
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
        transact = expr.create_run_transaction(
            self._table,
            run,
            items,
            old_count=thread.message_count,
            previous_active=thread.active_run,
        )
        action = f"create_run {run_id}"
        try:
            await self._call(
                action, self._db.transact_write_items, expect=_CANCELLED, TransactItems=transact
            )
        except ClientError as exc:
            codes = parse_reason_codes(exc.response.get("CancellationReasons", []))
            if codes and codes[0] == CONDITION_FAILED:
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
            if CONDITION_FAILED in codes or "TransactionConflict" in codes:
                raise ThreadMovedOn(
                    f"thread {thread_id} changed while creating run {run_id}"
                ) from exc
            raise cancelled_error(codes, action=action, table=self._table) from exc
        if codec.system_apart(settings) and settings.system is not None:
            _SYSTEM_PROMPTS.put((self._table, run_id), settings.system)
        return run

    async def get_run(self, run_id: str) -> RunState:
        validate_run_id(run_id)
        item = await self._get_item(f"get_run {run_id}", codec.run_key(run_id))
        if item is None:
            raise RunNotFound(f"run {run_id} not found")
        return await self._decode_run(item)

    async def _decode_run(self, item: Mapping[str, Any]) -> RunState:
        """A run item as a run, with the system prompt its settings item keeps apart (read
        once per process and run: it never changes)."""
        if not codec.run_system_apart(item):
            return codec.decode_run(item)
        run_id = str(item["pk"]["S"]).removeprefix("RUN#")
        key = (self._table, run_id)
        system = _SYSTEM_PROMPTS.get(key)
        if system is None:
            stored = await self._get_item(f"get_run_settings {run_id}", codec.settings_key(run_id))
            if stored is None:
                raise ThreadStoreError(f"run {run_id}: its settings item is missing")
            system = codec.decode_system(stored)
            _SYSTEM_PROMPTS.put(key, system)
        return codec.decode_run(item, system=system)

    async def claim_run(self, run_id: str, *, worker: str, lease_seconds: float) -> RunState:
        validate_run_id(run_id)
        now = self._clock()
        try:
            response = await self._call(
                f"claim_run {run_id}",
                self._db.update_item,
                expect=_CONDITION_FAILED,
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
            old: Any = exc.response.get("Item")
            if not old:
                raise RunNotFound(f"run {run_id} not found") from exc
            current = await self._decode_run(old)
            raise LeaseUnavailable(
                f"run {run_id} is {current.status.value}, leased by {current.lease.owner!r} "
                f"until {current.lease.lease_until:.3f}"
            ) from exc
        return await self._decode_run(response["Attributes"])

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
            response = await self._call(
                f"update of run {run_id}", self._db.update_item, expect=_CONDITION_FAILED, **request
            )
        except ClientError as exc:
            old: Any = exc.response.get("Item")
            if not old:
                raise RunNotFound(f"run {run_id} not found") from exc
            current = await self._decode_run(old)
            if rules.holds_lease(current, worker, epoch):
                raise _RunEnded(current) from exc
            if applied is not None and applied(current):
                return current  # an earlier attempt whose response was lost did it
            raise LeaseLost(
                f"run {run_id} is leased by {current.lease.owner!r} at epoch "
                f"{current.lease.epoch}, not {worker!r} at {epoch}"
            ) from exc
        return await self._decode_run(response["Attributes"])

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
                f"cancel_run {run_id}",
                self._db.update_item,
                expect=_CONDITION_FAILED,
                **expr.cancel_update(self._table, run_id, now=self._clock()),
            )
        except ClientError as exc:
            old: Any = exc.response.get("Item")
            if not old:
                raise RunNotFound(f"run {run_id} not found") from exc
            return await self._decode_run(old)
        return await self._decode_run(response["Attributes"])

    # -- the turn commit

    async def commit_turn(self, commit: TurnCommit) -> CommitResult:
        items = await self._message_items(
            commit.thread_id, commit.expected_message_count, commit.messages, commit.commit_id
        )
        transact = expr.commit_transaction(self._table, commit, items, now=self._clock())
        action = f"commit of run {commit.run_id}"
        attempt = 0
        while True:
            try:
                await self._call(
                    action,
                    self._db.transact_write_items,
                    expect=(*_CANCELLED, *_TRANSIENT_ERRORS),
                    TransactItems=transact,
                    ClientRequestToken=_request_token(commit.commit_id),
                )
                return CommitResult(rules.apply_commit(commit, now=self._clock()))
            except ClientError as exc:
                cancelled = error_code(exc) in _CANCELLED
                if cancelled:
                    verdict, detail = await self._diagnose(commit, exc)
                else:
                    verdict, detail = Verdict.RETRY, error_code(exc)
                if verdict == Verdict.DUPLICATE:
                    logger.info("commit %s had already landed: %s", commit.commit_id, detail)
                    return CommitResult(await self.get_run(commit.run_id), duplicate=True)
                if verdict == Verdict.FENCED:
                    raise CommitFenced(detail) from exc
                if verdict == Verdict.MOVED_ON:
                    raise ThreadMovedOn(detail) from exc
                if verdict == Verdict.ERROR or attempt >= self._retries:
                    if not cancelled:
                        raise dynamodb_error(exc, action=action, table=self._table) from exc
                    codes = parse_reason_codes(exc.response.get("CancellationReasons", []))
                    raise cancelled_error(codes, action=action, table=self._table) from exc
            except StoreUnavailable:
                # No answer, or a 5xx, after botocore's own retries: the commit may or may not
                # have landed. Re-sending is safe: its conditions recognise it.
                if attempt >= self._retries:
                    raise
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
            # The same run as the commit's base: its settings are the base's.
            run=ItemReason(
                codes[n],
                codec.decode_run(run_item, system=commit.base.settings.system)
                if run_item
                else None,
            ),
            thread=ItemReason(codes[n + 1]),
        )
        return diagnosis.verdict, diagnosis.detail

    # -- tool calls

    async def claim_tool_call(
        self, run_id: str, tool_use_id: str, *, name: str, epoch: int
    ) -> tuple[ToolCallRecord, bool]:
        record = ToolCallRecord(run_id, tool_use_id, name, ToolCallStatus.CLAIMED, epoch)
        reasons = await self._with_lease_check(
            run_id, epoch, expr.tool_claim_transaction(self._table, record)
        )
        if reasons is None:
            return record, True
        item = reasons[expr.OPERATION].get("Item")
        if item:
            return codec.decode_tool(item), False
        existing = await self.get_tool_call(run_id, tool_use_id)
        if existing is None:
            raise ThreadStoreError(f"claim of tool call {tool_use_id} failed: {reasons}")
        return existing, False

    async def reclaim_tool_call(
        self, run_id: str, tool_use_id: str, *, epoch: int, previous_epoch: int
    ) -> ToolCallRecord:
        transact = expr.tool_reclaim_transaction(
            self._table, run_id, tool_use_id, epoch=epoch, previous_epoch=previous_epoch
        )
        if await self._with_lease_check(run_id, epoch, transact) is not None:
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
        self, run_id: str, epoch: int, transact: list[dict[str, Any]]
    ) -> list[Mapping[str, Any]] | None:
        """Send a ``[lease check, operation]`` transaction. None when it applied, else the
        cancellation reasons when the operation's own condition failed (LeaseLost is raised
        for a lost lease)."""
        action = f"tool call on run {run_id}"
        attempt = 0
        while True:
            try:
                await self._call(
                    action, self._db.transact_write_items, expect=_CANCELLED, TransactItems=transact
                )
            except ClientError as exc:
                reasons: list[Mapping[str, Any]] = list(exc.response.get("CancellationReasons", []))
                codes = parse_reason_codes(reasons)
                if len(codes) > expr.LEASE_CHECK and codes[expr.LEASE_CHECK] == CONDITION_FAILED:
                    raise LeaseLost(f"run {run_id} is no longer at epoch {epoch}") from exc
                if len(codes) > expr.OPERATION and codes[expr.OPERATION] == CONDITION_FAILED:
                    return reasons
                # The calls of one turn are claimed concurrently, each transaction checking
                # the same run item: DynamoDB may cancel one for TransactionConflict. Claims
                # and reclaims are idempotent under their conditions, so sending the same
                # transaction again is safe.
                if not transient_cancellation(codes) or attempt >= self._retries:
                    raise cancelled_error(codes, action=action, table=self._table) from exc
            else:
                return None
            attempt += 1
            await self._sleep(min(0.05 * 2**attempt, 2.0))

    async def finish_tool_call(
        self, run_id: str, tool_use_id: str, *, epoch: int, content: str, is_error: bool
    ) -> ToolCallRecord:
        try:
            response = await self._call(
                f"finish of tool call {tool_use_id}",
                self._db.update_item,
                expect=_CONDITION_FAILED,
                **expr.tool_finish_update(
                    self._table,
                    run_id,
                    tool_use_id,
                    epoch=epoch,
                    content=content,
                    is_error=is_error,
                ),
            )
        except ClientError as exc:
            old: Any = exc.response.get("Item")
            current = codec.decode_tool(old) if old else None
            if current is not None and rules.tool_finish_applied(
                current, epoch=epoch, content=content, is_error=is_error
            ):
                return current
            raise ToolCallConflict(f"tool call {tool_use_id} is not held by epoch {epoch}") from exc
        return codec.decode_tool(response["Attributes"])

    async def get_tool_call(self, run_id: str, tool_use_id: str) -> ToolCallRecord | None:
        item = await self._get_item(
            f"get_tool_call {tool_use_id}", codec.tool_key(run_id, tool_use_id)
        )
        return None if item is None else codec.decode_tool(item)

    # -- the sweeper

    async def stalled_runs(self, *, now: float, limit: int = 100) -> list[str]:
        run_ids: list[str] = []
        for shard in range(rules.SWEEP_SHARDS):
            if len(run_ids) >= limit:
                break
            page = await self._call(
                "query of the sweep index",
                self._db.query,
                **expr.stalled_query(self._table, str(shard), now=now, limit=limit - len(run_ids)),
            )
            for item in page.get("Items", []):
                run_ids.append(str(item["pk"]["S"]).removeprefix("RUN#"))
        return run_ids

    async def mark_rescued(
        self, run: RunState, *, rescues: int, fruitless: int, now: float, next_in: float
    ) -> RunState:
        request = expr.rescue_update(
            self._table, run, rescues=rescues, fruitless=fruitless, now=now, next_in=next_in
        )
        return await self._sweep_write(run, request)

    async def abandon_run(self, run: RunState, *, error: ClassifiedError, now: float) -> RunState:
        return await self._sweep_write(
            run, expr.abandon_update(self._table, run, error=error, now=now)
        )

    async def _sweep_write(self, run: RunState, request: dict[str, Any]) -> RunState:
        try:
            response = await self._call(
                f"sweep of run {run.run_id}",
                self._db.update_item,
                expect=_CONDITION_FAILED,
                **request,
            )
        except ClientError as exc:
            raise RunChanged(f"run {run.run_id} changed since the sweeper read it") from exc
        return await self._decode_run(response["Attributes"])

    # -- plumbing

    async def _get_item(self, action: str, key: dict[str, Any]) -> dict[str, Any] | None:
        response = await self._call(
            action, self._db.get_item, TableName=self._table, Key=key, ConsistentRead=True
        )
        item: dict[str, Any] | None = response.get("Item")
        return item

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
