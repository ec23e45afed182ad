"""Condition and update expressions of the writes that decide a run's fate (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from awaken_s3.threads import codec, rules
from awaken_s3.threads.codec import n_attr, s_attr
from awaken_s3.threads.models import RunStatus, TurnCommit

Item = dict[str, Any]


def claim_update(table: str, run_id: str, *, worker: str, now: float, lease_seconds: float) -> Item:
    """``UpdateItem`` arguments of a lease claim: a runnable run whose lease is free, expired
    or already the claimer's; the epoch grows by one on every claim."""
    return {
        "TableName": table,
        "Key": codec.run_key(run_id),
        "UpdateExpression": (
            "SET lease_owner = :me, epoch = epoch + :one, lease_until = :until, "
            "#status = :running, updated_at = :now"
        ),
        "ConditionExpression": (
            "#status IN (:queued, :running, :suspended) AND "
            "(attribute_not_exists(lease_owner) OR lease_until <= :now OR lease_owner = :me)"
        ),
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {
            ":me": s_attr(worker),
            ":one": n_attr(1),
            ":until": n_attr(now + lease_seconds),
            ":now": n_attr(now),
            ":running": s_attr(RunStatus.RUNNING.value),
            ":queued": s_attr(RunStatus.QUEUED.value),
            ":suspended": s_attr(RunStatus.SUSPENDED.value),
        },
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def commit_transaction(
    table: str, commit: TurnCommit, message_items: Sequence[Item], *, now: float
) -> list[Item]:
    """``TransactItems`` of a turn commit: ``[message puts..., run update, thread update]``.

    Each message put requires its position to be free; the run update requires the
    committing epoch, the expected turn and message count, and a running status; the thread
    update requires the expected message count. Every item returns its old value on a lost
    condition, for :func:`awaken_s3.threads.cancellation.diagnose_commit`.
    """
    new = rules.apply_commit(commit, now=now)
    sets = [
        "turn = :new_turn",
        "message_count = :new_count",
        "usage_in = usage_in + :din",
        "usage_out = usage_out + :dout",
        # Runs created before cache usage was recorded have no such attributes yet.
        "usage_cache_read = if_not_exists(usage_cache_read, :nil) + :dcr",
        "usage_cache_write = if_not_exists(usage_cache_write, :nil) + :dcw",
        "updated_at = :now",
    ]
    values: dict[str, Any] = {
        ":new_turn": n_attr(new.turn),
        ":new_count": n_attr(new.message_count),
        ":din": n_attr(commit.usage.input_tokens),
        ":dout": n_attr(commit.usage.output_tokens),
        ":dcr": n_attr(commit.usage.cache_read_tokens),
        ":dcw": n_attr(commit.usage.cache_write_tokens),
        ":nil": n_attr(0),
        ":now": n_attr(new.updated_at),
        ":epoch": n_attr(commit.epoch),
        ":turn": n_attr(commit.expected_turn),
        ":count": n_attr(commit.expected_message_count),
        ":running": s_attr(RunStatus.RUNNING.value),
    }
    if commit.stop_reason is not None:
        sets.append("stop_reason = :stop")
        values[":stop"] = s_attr(commit.stop_reason)
    names = {"#status": "status"}
    if commit.error is not None:
        sets.append("#error = :error")
        values[":error"] = codec.error_attr(commit.error)
        names["#error"] = "error"
    update = "SET " + ", ".join(sets)
    if commit.final_status is not None:
        update = update.replace("SET ", "SET #status = :final, lease_until = :zero, ")
        update += " REMOVE lease_owner"
        values[":final"] = s_attr(commit.final_status.value)
        values[":zero"] = n_attr(0)
    messages = [
        {
            "Put": {
                "TableName": table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        for item in message_items
    ]
    run = {
        "Update": {
            "TableName": table,
            "Key": codec.run_key(commit.run_id),
            "UpdateExpression": update,
            "ConditionExpression": (
                "epoch = :epoch AND turn = :turn AND message_count = :count AND #status = :running"
            ),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }
    thread = {
        "Update": {
            "TableName": table,
            "Key": codec.thread_key(commit.thread_id),
            "UpdateExpression": "SET message_count = :new_count",
            "ConditionExpression": "message_count = :count",
            "ExpressionAttributeValues": {
                ":new_count": n_attr(new.message_count),
                ":count": n_attr(commit.expected_message_count),
            },
        }
    }
    return [*messages, run, thread]
