"""DynamoDB item layout: keys, attribute encoding and decoding (pure, no I/O).

One table, string keys ``pk``/``sk``::

    pk = THREAD#<thread_id>   sk = THREAD                 thread: owner, message_count
    pk = THREAD#<thread_id>   sk = MSG#<seq, 10 digits>   one message (body or body_ref)
    pk = RUN#<run_id>         sk = RUN                    run state and lease
    pk = RUN#<run_id>         sk = SETTINGS               a long system prompt, written once
    pk = RUN#<run_id>         sk = TOOL#<tool_use_id>     one tool-call record

Zero-padded sequence numbers make the sort key order the message order, so one Query reads a
thread in order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

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


def s_attr(value: str) -> dict[str, str]:
    return {"S": value}


def n_attr(value: int | float) -> dict[str, str]:
    # Fixed-point for floats: repr() can give exponent forms and 17 digits; times and
    # leases need microseconds at most.
    return {"N": str(value) if isinstance(value, int) else format(value, ".6f")}


def _get_s(item: Mapping[str, Any], name: str) -> str | None:
    attr = item.get(name)
    return None if attr is None else str(attr["S"])


def _get_n(item: Mapping[str, Any], name: str, default: float = 0) -> float:
    attr = item.get(name)
    return default if attr is None else float(attr["N"])


def _get_i(item: Mapping[str, Any], name: str, default: int = 0) -> int:
    attr = item.get(name)
    return default if attr is None else int(attr["N"])


def thread_pk(thread_id: str) -> str:
    return f"THREAD#{thread_id}"


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def thread_key(thread_id: str) -> Item:
    return {"pk": s_attr(thread_pk(thread_id)), "sk": s_attr(THREAD_SK)}


def message_sk(seq: int) -> str:
    return f"{MSG_PREFIX}{seq:0{SEQ_DIGITS}d}"


def message_key(thread_id: str, seq: int) -> Item:
    return {"pk": s_attr(thread_pk(thread_id)), "sk": s_attr(message_sk(seq))}


def run_key(run_id: str) -> Item:
    return {"pk": s_attr(run_pk(run_id)), "sk": s_attr(RUN_SK)}


def settings_key(run_id: str) -> Item:
    return {"pk": s_attr(run_pk(run_id)), "sk": s_attr(SETTINGS_SK)}


def tool_key(run_id: str, tool_use_id: str) -> Item:
    return {"pk": s_attr(run_pk(run_id)), "sk": s_attr(f"{TOOL_PREFIX}{tool_use_id}")}


# -- threads


def thread_item(thread: Thread) -> Item:
    item = thread_key(thread.thread_id)
    item.update(
        owner=s_attr(thread.owner),
        message_count=n_attr(thread.message_count),
        created_at=n_attr(thread.created_at),
        metadata={"M": {k: s_attr(v) for k, v in thread.metadata.items()}},
    )
    if thread.active_run is not None:
        item["active_run"] = s_attr(thread.active_run)
    return item


def decode_thread(item: Mapping[str, Any]) -> Thread:
    thread_id = str(item["pk"]["S"]).removeprefix("THREAD#")
    metadata = {k: str(v["S"]) for k, v in item.get("metadata", {"M": {}})["M"].items()}
    return Thread(
        thread_id=thread_id,
        owner=_get_s(item, "owner") or "",
        message_count=_get_i(item, "message_count"),
        created_at=_get_n(item, "created_at"),
        metadata=metadata,
        active_run=_get_s(item, "active_run"),
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
    item.update(
        seq=n_attr(seq),
        role=s_attr(message.role),
        commit_id=s_attr(commit_id),
        created_at=n_attr(now),
    )
    if body_ref is not None:
        item["body_ref"] = s_attr(body_ref)
    else:
        item["body"] = s_attr(body if body is not None else encode_content(message))
    return item


def message_body_ref(item: Mapping[str, Any]) -> str | None:
    return _get_s(item, "body_ref")


def decode_stored_message(
    item: Mapping[str, Any], *, body: str | bytes | None = None
) -> StoredMessage:
    """``body`` supplies an offloaded body already fetched; without it the message is None."""
    role = _get_s(item, "role") or "user"
    inline = _get_s(item, "body")
    raw = inline if inline is not None else body
    message = decode_body(role, raw) if raw is not None else None
    return StoredMessage(_get_i(item, "seq"), message, _get_s(item, "commit_id"))


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
    item["system"] = s_attr(run.settings.system or "")
    return item


def decode_system(item: Mapping[str, Any]) -> str:
    return _get_s(item, "system") or ""


def run_system_apart(item: Mapping[str, Any]) -> bool:
    """Whether a run item's system prompt is in the settings item (read it to decode)."""
    raw = _get_s(item, "settings")
    return raw is not None and bool(json.loads(raw).get("system_apart"))


def run_item(run: RunState) -> Item:
    item = run_key(run.run_id)
    item.update(
        thread_id=s_attr(run.thread_id),
        owner=s_attr(run.owner),
        settings=s_attr(settings_json(run.settings)),
        status=s_attr(run.status.value),
        turn=n_attr(run.turn),
        message_count=n_attr(run.message_count),
        usage_in=n_attr(run.usage.input_tokens),
        usage_out=n_attr(run.usage.output_tokens),
        usage_cache_read=n_attr(run.usage.cache_read_tokens),
        usage_cache_write=n_attr(run.usage.cache_write_tokens),
        epoch=n_attr(run.lease.epoch),
        lease_until=n_attr(run.lease.lease_until),
        created_at=n_attr(run.created_at),
        updated_at=n_attr(run.updated_at),
        previous_lease_until=n_attr(run.previous_lease_until),
        idle_suspensions=n_attr(run.idle_suspensions),
        rescues=n_attr(run.rescues),
        fruitless_rescues=n_attr(run.fruitless_rescues),
        rescue_mark=n_attr(run.rescue_mark),
        rescue_epoch=n_attr(run.rescue_epoch),
    )
    if run.sweep_at is not None:
        # Both index keys, or neither: an ended run leaves the sparse index.
        item["sweep_shard"] = s_attr(rules.sweep_shard(run.run_id))
        item["sweep_at"] = n_attr(run.sweep_at)
    if run.lease.owner is not None:
        item["lease_owner"] = s_attr(run.lease.owner)
    if run.stop_reason is not None:
        item["stop_reason"] = s_attr(run.stop_reason)
    if run.error is not None:
        item["error"] = error_attr(run.error)
    if run.request_digest is not None:
        item["request_digest"] = s_attr(run.request_digest)
    return item


def error_attr(error: ClassifiedError) -> dict[str, Any]:
    return {
        "M": {
            "code": s_attr(error.code),
            "message": s_attr(error.message),
            "retryable": {"BOOL": error.retryable},
        }
    }


def decode_run(item: Mapping[str, Any], *, system: str | None = None) -> RunState:
    """``system``: the settings item's prompt when :func:`run_system_apart` (without it such
    a run decodes with no system prompt: fine for a listing, never for driving the run)."""
    error = None
    if "error" in item:
        err = item["error"]["M"]
        error = ClassifiedError(
            code=str(err["code"]["S"]),
            message=str(err["message"]["S"]),
            retryable=bool(err["retryable"]["BOOL"]),
        )
    return RunState(
        run_id=str(item["pk"]["S"]).removeprefix("RUN#"),
        thread_id=_get_s(item, "thread_id") or "",
        owner=_get_s(item, "owner") or "",
        settings=decode_settings(_get_s(item, "settings") or '{"model": ""}', system=system),
        status=RunStatus(item["status"]["S"]),
        turn=_get_i(item, "turn"),
        message_count=_get_i(item, "message_count"),
        usage=Usage(
            _get_i(item, "usage_in"),
            _get_i(item, "usage_out"),
            _get_i(item, "usage_cache_read"),
            _get_i(item, "usage_cache_write"),
        ),
        error=error,
        stop_reason=_get_s(item, "stop_reason"),
        lease=Lease(
            owner=_get_s(item, "lease_owner"),
            epoch=_get_i(item, "epoch"),
            lease_until=_get_n(item, "lease_until"),
        ),
        created_at=_get_n(item, "created_at"),
        updated_at=_get_n(item, "updated_at"),
        sweep_at=_get_n(item, "sweep_at") if "sweep_at" in item else None,
        previous_lease_until=_get_n(item, "previous_lease_until"),
        idle_suspensions=_get_i(item, "idle_suspensions"),
        rescues=_get_i(item, "rescues"),
        fruitless_rescues=_get_i(item, "fruitless_rescues"),
        rescue_mark=_get_i(item, "rescue_mark", -1),
        rescue_epoch=_get_i(item, "rescue_epoch", -1),
        request_digest=_get_s(item, "request_digest"),
    )


# -- tool calls


def tool_item(record: ToolCallRecord) -> Item:
    item = tool_key(record.run_id, record.tool_use_id)
    item.update(
        name=s_attr(record.name),
        status=s_attr(record.status.value),
        epoch=n_attr(record.epoch),
        attempts=n_attr(record.attempts),
        is_error={"BOOL": record.is_error},
    )
    if record.content is not None:
        item["content"] = s_attr(record.content)
    return item


def decode_tool(item: Mapping[str, Any]) -> ToolCallRecord:
    return ToolCallRecord(
        run_id=str(item["pk"]["S"]).removeprefix("RUN#"),
        tool_use_id=str(item["sk"]["S"]).removeprefix(TOOL_PREFIX),
        name=_get_s(item, "name") or "",
        status=ToolCallStatus(item["status"]["S"]),
        epoch=_get_i(item, "epoch"),
        attempts=_get_i(item, "attempts", 1),
        content=_get_s(item, "content"),
        is_error=bool(item.get("is_error", {"BOOL": False})["BOOL"]),
    )
