"""DynamoDB item layout: keys, attribute encoding and decoding (pure, no I/O).

One table, string keys ``pk``/``sk``::

    pk = THREAD#<thread_id>   sk = THREAD                 thread: owner, message_count
    pk = THREAD#<thread_id>   sk = MSG#<seq, 10 digits>   one message (body or body_ref)
    pk = RUN#<run_id>         sk = RUN                    run state and lease
    pk = RUN#<run_id>         sk = SETTINGS               a long system prompt, written once
    pk = RUN#<run_id>         sk = TOOL#<turn, 10 digits>#<tool_use_id>
                                                          one tool-call record
    pk = RUN#<run_id>         sk = TOOL#<tool_use_id>     a legacy tool-call record (stored
                                                          before the turn was in the key)

Zero-padded sequence numbers make the sort key order the message order, so one Query reads a
thread in order.

Items hold the values DynamoDB stores (strings, ints and :class:`~decimal.Decimal` numbers,
booleans, maps), so both backends keep the same items: the in-memory store as they are, the
DynamoDB store through boto3's own :class:`~boto3.dynamodb.types.TypeSerializer` and
:class:`~boto3.dynamodb.types.TypeDeserializer` (:func:`to_wire`, :func:`from_wire`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from pydantic import TypeAdapter

from awaken_s3.messages import ContentBlock, Message
from awaken_s3.streaming.outcome import ClassifiedError, Usage
from awaken_s3.threads import rules
from awaken_s3.threads.cancellation import StoredMessage
from awaken_s3.threads.models import (
    Lease,
    RunSettings,
    RunState,
    RunStatus,
    Thread,
    ToolCallRecord,
    ToolCallStatus,
)

Item = dict[str, Any]

THREAD_SK: Final = "THREAD"
RUN_SK: Final = "RUN"
SETTINGS_SK: Final = "SETTINGS"
#: a system prompt longer than this many UTF-8 bytes lives in the run's settings item, written
#: once with the run: the run item is rewritten by every claim, renewal, release and commit,
#: and each of those writes bills the item's size (per KB), so the prompt would be billed on
#: every one. Up to this size it keeps the run item within one write unit, inline.
INLINE_SYSTEM_BYTES: Final = 256
MSG_PREFIX: Final = "MSG#"
TOOL_PREFIX: Final = "TOOL#"
SEQ_DIGITS: Final = 10

_CONTENT = TypeAdapter(tuple[ContentBlock, ...])
_SERIALIZER: Final = TypeSerializer()
_DESERIALIZER: Final = TypeDeserializer()


def to_wire(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item as DynamoDB's low-level API sends it (``{"S": ...}``, ``{"N": ...}``, ...)."""
    return {name: _SERIALIZER.serialize(value) for name, value in item.items()}


def from_wire(item: Mapping[str, Any]) -> Item:
    """An item from DynamoDB's low-level API, as its values."""
    return {name: _DESERIALIZER.deserialize(value) for name, value in item.items()}


def number(value: float) -> int | Decimal:
    """A number as DynamoDB keeps it: ints as they are, other numbers fixed-point to the
    microsecond (a float's repr can have an exponent and 17 digits; leases need no more)."""
    if isinstance(value, int):
        return value
    return Decimal(format(value, ".6f"))


def thread_pk(thread_id: str) -> str:
    return f"THREAD#{thread_id}"


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def thread_key(thread_id: str) -> Item:
    return {"pk": thread_pk(thread_id), "sk": THREAD_SK}


def message_sk(seq: int) -> str:
    return f"{MSG_PREFIX}{seq:0{SEQ_DIGITS}d}"


def message_key(thread_id: str, seq: int) -> Item:
    return {"pk": thread_pk(thread_id), "sk": message_sk(seq)}


def run_key(run_id: str) -> Item:
    return {"pk": run_pk(run_id), "sk": RUN_SK}


def settings_key(run_id: str) -> Item:
    return {"pk": run_pk(run_id), "sk": SETTINGS_SK}


def tool_sk(tool_use_id: str, turn: int | None) -> str:
    """A tool call's sort key: its turn and its id (``turn`` None: the legacy layout, keyed
    by the id alone, which providers may repeat from turn to turn)."""
    if turn is None:
        return f"{TOOL_PREFIX}{tool_use_id}"
    if turn < 0:
        raise ValueError("a tool call's turn is not negative")
    return f"{TOOL_PREFIX}{turn:0{SEQ_DIGITS}d}#{tool_use_id}"


def tool_key(run_id: str, tool_use_id: str, turn: int | None) -> Item:
    return {"pk": run_pk(run_id), "sk": tool_sk(tool_use_id, turn)}


def run_id_of(item: Mapping[str, Any]) -> str:
    return str(item["pk"]).removeprefix("RUN#")


# -- threads


def thread_item(thread: Thread) -> Item:
    item = thread_key(thread.thread_id)
    item.update(
        owner=thread.owner,
        message_count=thread.message_count,
        created_at=number(thread.created_at),
        metadata=dict(thread.metadata),
    )
    if thread.active_run is not None:
        item["active_run"] = thread.active_run
    return item


def thread_of(item: Mapping[str, Any]) -> Thread:
    return Thread(
        thread_id=str(item["pk"]).removeprefix("THREAD#"),
        owner=str(item.get("owner", "")),
        message_count=int(item.get("message_count", 0)),
        created_at=float(item.get("created_at", 0)),
        metadata={str(k): str(v) for k, v in item.get("metadata", {}).items()},
        active_run=item.get("active_run"),
    )


# -- messages


def encode_content(message: Message) -> str:
    return json.dumps(
        [block.model_dump(mode="json") for block in message.content],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def decode_body(role: str, body: str | bytes) -> Message:
    content = _CONTENT.validate_json(body)
    return Message.model_validate({"role": role, "content": content})


def message_item(
    thread_id: str,
    seq: int,
    message: Message,
    *,
    commit_id: str,
    now: float,
    body: str | None,
    body_ref: str | None,
) -> Item:
    """Exactly one of ``body`` (inline JSON content) and ``body_ref`` (an S3 key) is set."""
    item = message_key(thread_id, seq)
    item.update(seq=seq, role=message.role, commit_id=commit_id, created_at=number(now))
    if body_ref is not None:
        item["body_ref"] = body_ref
    else:
        item["body"] = body if body is not None else encode_content(message)
    return item


def message_body_ref(item: Mapping[str, Any]) -> str | None:
    """The S3 key of an offloaded body (of an item as its values, or as sent on the wire)."""
    ref = item.get("body_ref")
    if isinstance(ref, dict):
        return str(ref["S"])
    return None if ref is None else str(ref)


def stored_message_of(item: Mapping[str, Any], *, body: str | bytes | None = None) -> StoredMessage:
    """``body`` supplies an offloaded body already fetched; without it the message is None."""
    role = str(item.get("role") or "user")
    inline = item.get("body")
    raw = inline if inline is not None else body
    message = decode_body(role, raw) if raw is not None else None
    commit_id = item.get("commit_id")
    return StoredMessage(
        int(item.get("seq", 0)), message, None if commit_id is None else str(commit_id)
    )


# -- runs


def system_apart(settings: RunSettings) -> bool:
    """Whether the run's system prompt is stored in its settings item (see
    :data:`INLINE_SYSTEM_BYTES`)."""
    return settings.system is not None and len(settings.system.encode()) > INLINE_SYSTEM_BYTES


def settings_json(settings: RunSettings) -> str:
    apart = system_apart(settings)
    data: dict[str, Any] = {
        "model": settings.model,
        "system": None if apart else settings.system,
        "max_tokens": settings.max_tokens,
        "temperature": settings.temperature,
        "tools": list(settings.tools),
        "max_turns": settings.max_turns,
    }
    # Only when set: a run item written before agents existed decodes to the same settings.
    if settings.agent:
        data["agent"] = settings.agent
    if settings.token_budget is not None:
        data["token_budget"] = settings.token_budget
    if apart:
        data["system_apart"] = True
    return json.dumps(data, separators=(",", ":"))


def decode_settings(raw: str, *, system: str | None = None) -> RunSettings:
    """``system``: the prompt read from the settings item, for settings that keep it apart."""
    data = json.loads(raw)
    return RunSettings(
        model=data["model"],
        system=system if data.get("system_apart") else data.get("system"),
        max_tokens=int(data.get("max_tokens", 4096)),
        temperature=data.get("temperature"),
        tools=tuple(data.get("tools", ())),
        max_turns=int(data.get("max_turns", 25)),
        agent=str(data.get("agent") or ""),
        token_budget=None if data.get("token_budget") is None else int(data["token_budget"]),
    )


def settings_item(run: RunState) -> Item:
    """The run's immutable settings item: the system prompt kept out of the run item."""
    item = settings_key(run.run_id)
    item["system"] = run.settings.system or ""
    return item


def system_of(item: Mapping[str, Any]) -> str:
    return str(item.get("system") or "")


def run_system_apart(item: Mapping[str, Any]) -> bool:
    """Whether a run item's system prompt is in the settings item (read it to decode)."""
    raw = item.get("settings")
    return raw is not None and bool(json.loads(str(raw)).get("system_apart"))


def run_item(run: RunState) -> Item:
    item = run_key(run.run_id)
    item.update(
        thread_id=run.thread_id,
        owner=run.owner,
        settings=settings_json(run.settings),
        status=run.status.value,
        turn=run.turn,
        message_count=run.message_count,
        usage_in=run.usage.input_tokens,
        usage_out=run.usage.output_tokens,
        usage_cache_read=run.usage.cache_read_tokens,
        usage_cache_write=run.usage.cache_write_tokens,
        epoch=run.lease.epoch,
        lease_until=number(run.lease.lease_until),
        created_at=number(run.created_at),
        updated_at=number(run.updated_at),
        previous_lease_until=number(run.previous_lease_until),
        idle_suspensions=run.idle_suspensions,
        rescues=run.rescues,
        fruitless_rescues=run.fruitless_rescues,
        rescue_mark=run.rescue_mark,
        rescue_epoch=run.rescue_epoch,
    )
    if run.sweep_at is not None:
        # Both index keys, or neither: an ended run leaves the sparse index.
        item["sweep_shard"] = rules.sweep_shard(run.run_id)
        item["sweep_at"] = number(run.sweep_at)
    optional = {
        "lease_owner": run.lease.owner,
        "stop_reason": run.stop_reason,
        "error": None if run.error is None else error_map(run.error),
        "request_digest": run.request_digest,
    }
    item.update({name: value for name, value in optional.items() if value is not None})
    return item


def error_map(error: ClassifiedError) -> dict[str, Any]:
    return {"code": str(error.code), "message": error.message, "retryable": error.retryable}


def _int(item: Mapping[str, Any], name: str, default: int = 0) -> int:
    return int(item.get(name, default))


def _float(item: Mapping[str, Any], name: str) -> float:
    return float(item.get(name, 0))


def run_of(item: Mapping[str, Any], *, system: str | None = None) -> RunState:
    """``system``: the settings item's prompt when :func:`run_system_apart` (without it such
    a run decodes with no system prompt: fine for a listing, never for driving the run)."""
    err = item.get("error")
    error = None
    if err is not None:
        error = ClassifiedError(str(err["code"]), str(err["message"]), bool(err["retryable"]))
    return RunState(
        run_id=run_id_of(item),
        thread_id=str(item.get("thread_id", "")),
        owner=str(item.get("owner", "")),
        settings=decode_settings(str(item.get("settings") or '{"model": ""}'), system=system),
        status=RunStatus(item["status"]),
        turn=_int(item, "turn"),
        message_count=_int(item, "message_count"),
        usage=Usage(
            _int(item, "usage_in"),
            _int(item, "usage_out"),
            _int(item, "usage_cache_read"),
            _int(item, "usage_cache_write"),
        ),
        error=error,
        stop_reason=item.get("stop_reason"),
        lease=Lease(item.get("lease_owner"), _int(item, "epoch"), _float(item, "lease_until")),
        created_at=_float(item, "created_at"),
        updated_at=_float(item, "updated_at"),
        sweep_at=float(item["sweep_at"]) if "sweep_at" in item else None,
        previous_lease_until=_float(item, "previous_lease_until"),
        idle_suspensions=_int(item, "idle_suspensions"),
        rescues=_int(item, "rescues"),
        fruitless_rescues=_int(item, "fruitless_rescues"),
        rescue_mark=_int(item, "rescue_mark", -1),
        rescue_epoch=_int(item, "rescue_epoch", -1),
        request_digest=item.get("request_digest"),
    )


# -- tool calls


def tool_item(record: ToolCallRecord) -> Item:
    item = tool_key(record.run_id, record.tool_use_id, record.turn)
    item.update(
        name=record.name,
        status=record.status.value,
        epoch=record.epoch,
        attempts=record.attempts,
        is_error=record.is_error,
    )
    if record.turn is not None:
        # The id and turn as attributes: a record is decoded from them, never by parsing a
        # sort key whose id part is the provider's free text.
        item.update(call_id=record.tool_use_id, turn=record.turn, timeouts=record.timeouts)
    optional = {"content": record.content, "input_digest": record.input_digest}
    item.update({name: value for name, value in optional.items() if value is not None})
    flags = {"adopted": record.adopted, "legacy_key": record.legacy_key}
    item.update({name: True for name, value in flags.items() if value})
    return item


def tool_of(item: Mapping[str, Any]) -> ToolCallRecord:
    content = item.get("content")
    digest = item.get("input_digest")
    turn = item.get("turn")
    call_id = item.get("call_id")
    return ToolCallRecord(
        run_id=run_id_of(item),
        tool_use_id=str(call_id) if turn is not None else str(item["sk"]).removeprefix(TOOL_PREFIX),
        name=str(item.get("name", "")),
        status=ToolCallStatus(item["status"]),
        epoch=_int(item, "epoch"),
        attempts=_int(item, "attempts", 1),
        content=None if content is None else str(content),
        is_error=bool(item.get("is_error", False)),
        turn=None if turn is None else int(turn),
        input_digest=None if digest is None else str(digest),
        timeouts=_int(item, "timeouts"),
        adopted=bool(item.get("adopted", False)),
        legacy_key=bool(item.get("legacy_key", False)),
    )


# -- raw answers of DynamoDB's low-level API (a scan, a console's reads)


def decode_thread(item: Mapping[str, Any]) -> Thread:
    return thread_of(from_wire(item))


def decode_run(item: Mapping[str, Any], *, system: str | None = None) -> RunState:
    return run_of(from_wire(item), system=system)


def decode_tool(item: Mapping[str, Any]) -> ToolCallRecord:
    return tool_of(from_wire(item))
