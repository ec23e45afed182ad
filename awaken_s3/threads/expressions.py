"""Condition and update expressions of the writes that decide a run's fate (pure, no I/O).

Each builder returns the whole request (``UpdateItem`` arguments or ``TransactItems``), built
from its parts: no caller edits a built expression string.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import codec, rules
from awaken_s3.threads.codec import n_attr, s_attr
from awaken_s3.threads.models import RunState, RunStatus, TurnCommit

Item = dict[str, Any]

#: the sparse index of runs that have not ended (see docs/THREADS.md, "The sweeper")
SWEEP_INDEX: Final = "sweep"
_SWEEP_ATTRS: Final = ("sweep_shard", "sweep_at")
_RUNNABLE_VALUES: Final = {
    ":queued": s_attr(RunStatus.QUEUED.value),
    ":running": s_attr(RunStatus.RUNNING.value),
    ":suspended": s_attr(RunStatus.SUSPENDED.value),
}
_RUNNABLE_CONDITION: Final = "#status IN (:queued, :running, :suspended)"
_LEASE_HELD: Final = "lease_owner = :me AND epoch = :epoch"
_LEASE_DEAD: Final = "(attribute_not_exists(lease_owner) OR lease_until <= :now)"


def update_expression(sets: Iterable[str], removes: Iterable[str] = ()) -> str:
    expression = "SET " + ", ".join(sets)
    removes = list(removes)
    if removes:
        expression += " REMOVE " + ", ".join(removes)
    return expression


def _names(*expressions: str) -> dict[str, str]:
    # DynamoDB rejects a name placeholder that no expression uses, and both are reserved words.
    text = " ".join(expressions)
    return {name: name[1:] for name in ("#status", "#error") if name in text}


def _update_item(
    table: str,
    run_id: str,
    *,
    sets: Sequence[str],
    removes: Sequence[str] = (),
    condition: str,
    values: Mapping[str, Any],
) -> Item:
    update = update_expression(sets, removes)
    args: Item = {
        "TableName": table,
        "Key": codec.run_key(run_id),
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeValues": dict(values),
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    names = _names(update, condition)
    if names:
        args["ExpressionAttributeNames"] = names
    return args


def claim_update(
    table: str,
    run_id: str,
    *,
    worker: str,
    now: float,
    lease_seconds: float,
    sweep_grace: float = rules.DEFAULT_SWEEP_GRACE,
) -> Item:
    """``UpdateItem`` arguments of a lease claim: a runnable run whose lease is free, expired
    or already the claimer's; the epoch grows by one on every claim.

    ``previous_lease_until = lease_until`` keeps the replaced lease's expiry (operands of an
    update expression read the item as it was before the update).
    """
    until = now + lease_seconds
    return _update_item(
        table,
        run_id,
        sets=(
            "lease_owner = :me",
            "epoch = epoch + :one",
            "previous_lease_until = lease_until",
            "lease_until = :until",
            "#status = :running",
            "updated_at = :now",
            "sweep_shard = :shard",
            "sweep_at = :sweep",
        ),
        condition=(
            f"{_RUNNABLE_CONDITION} AND "
            "(attribute_not_exists(lease_owner) OR lease_until <= :now OR lease_owner = :me)"
        ),
        values={
            ":me": s_attr(worker),
            ":one": n_attr(1),
            ":until": n_attr(until),
            ":now": n_attr(now),
            ":shard": s_attr(rules.sweep_shard(run_id)),
            ":sweep": n_attr(until + sweep_grace),
            **_RUNNABLE_VALUES,
        },
    )


def _leased(worker: str, epoch: int, now: float) -> dict[str, Any]:
    return {":me": s_attr(worker), ":epoch": n_attr(epoch), ":now": n_attr(now)}


def renew_update(
    table: str,
    run_id: str,
    *,
    worker: str,
    epoch: int,
    now: float,
    lease_seconds: float,
    sweep_grace: float = rules.DEFAULT_SWEEP_GRACE,
) -> Item:
    until = now + lease_seconds
    return _update_item(
        table,
        run_id,
        sets=("lease_until = :until", "updated_at = :now", "sweep_at = :sweep"),
        condition=_LEASE_HELD,
        values={
            **_leased(worker, epoch, now),
            ":until": n_attr(until),
            ":sweep": n_attr(until + sweep_grace),
        },
    )


def release_update(
    table: str,
    run_id: str,
    *,
    worker: str,
    epoch: int,
    now: float,
    status: RunStatus,
    idle_suspensions: int,
    sweep_grace: float = rules.DEFAULT_SWEEP_GRACE,
) -> Item:
    """Give the lease up, leaving ``status``; only while the run has not ended."""
    return _update_item(
        table,
        run_id,
        sets=(
            "#status = :status",
            "lease_until = :zero",
            "updated_at = :now",
            # The caller is about to send the message that drives the run next.
            "sweep_at = :sweep",
            "idle_suspensions = :idle",
        ),
        removes=("lease_owner",),
        condition=f"{_LEASE_HELD} AND {_RUNNABLE_CONDITION}",
        values={
            **_leased(worker, epoch, now),
            **_RUNNABLE_VALUES,
            ":status": s_attr(status.value),
            ":zero": n_attr(0),
            ":sweep": n_attr(now + sweep_grace),
            ":idle": n_attr(idle_suspensions),
        },
    )


def drop_lease_update(table: str, run_id: str, *, worker: str, epoch: int, now: float) -> Item:
    """Let the lease of an ended run go (a cancel landed while the worker held it)."""
    return _update_item(
        table,
        run_id,
        sets=("lease_until = :zero", "updated_at = :now"),
        removes=("lease_owner", *_SWEEP_ATTRS),
        condition=_LEASE_HELD,
        values={**_leased(worker, epoch, now), ":zero": n_attr(0)},
    )


def finish_update(
    table: str,
    run_id: str,
    *,
    worker: str,
    epoch: int,
    now: float,
    status: RunStatus,
    error: ClassifiedError | None,
) -> Item:
    """End the run with a terminal ``status``; only while it has not ended already."""
    sets = ["#status = :status", "lease_until = :zero", "updated_at = :now"]
    values: dict[str, Any] = {
        **_leased(worker, epoch, now),
        **_RUNNABLE_VALUES,
        ":status": s_attr(status.value),
        ":zero": n_attr(0),
    }
    if error is not None:
        sets.append("#error = :error")
        values[":error"] = codec.error_attr(error)
    return _update_item(
        table,
        run_id,
        sets=sets,
        removes=("lease_owner", *_SWEEP_ATTRS),
        condition=f"{_LEASE_HELD} AND {_RUNNABLE_CONDITION}",
        values=values,
    )


def cancel_update(table: str, run_id: str, *, now: float) -> Item:
    return _update_item(
        table,
        run_id,
        sets=("#status = :cancelled", "updated_at = :now"),
        removes=_SWEEP_ATTRS,
        condition=_RUNNABLE_CONDITION,
        values={
            ":cancelled": s_attr(RunStatus.CANCELLED.value),
            ":now": n_attr(now),
            **_RUNNABLE_VALUES,
        },
    )


def _sweep_condition(run: RunState, now: float) -> tuple[str, dict[str, Any]]:
    """Mirror of :func:`rules.sweep_holds`."""
    return (
        f"epoch = :epoch AND rescues = :rescues AND sweep_at <= :now AND {_RUNNABLE_CONDITION}"
        f" AND {_LEASE_DEAD}",
        {
            ":epoch": n_attr(run.lease.epoch),
            ":rescues": n_attr(run.rescues),
            ":now": n_attr(now),
            **_RUNNABLE_VALUES,
        },
    )


def rescue_update(
    table: str,
    run: RunState,
    *,
    rescues: int,
    now: float,
    sweep_grace: float = rules.DEFAULT_SWEEP_GRACE,
) -> Item:
    condition, values = _sweep_condition(run, now)
    return _update_item(
        table,
        run.run_id,
        sets=(
            "rescues = :count",
            "rescue_mark = :mark",
            "sweep_at = :sweep",
            "updated_at = :now",
        ),
        condition=condition,
        values={
            **values,
            ":count": n_attr(rescues),
            ":mark": n_attr(run.message_count),
            ":sweep": n_attr(now + sweep_grace),
        },
    )


def abandon_update(table: str, run: RunState, *, error: ClassifiedError, now: float) -> Item:
    condition, values = _sweep_condition(run, now)
    return _update_item(
        table,
        run.run_id,
        sets=("#status = :failed", "#error = :error", "lease_until = :zero", "updated_at = :now"),
        removes=("lease_owner", *_SWEEP_ATTRS),
        condition=condition,
        values={
            **values,
            ":failed": s_attr(RunStatus.FAILED.value),
            ":error": codec.error_attr(error),
            ":zero": n_attr(0),
        },
    )


def stalled_query(table: str, shard: str, *, now: float, limit: int) -> Item:
    """``Query`` arguments for one shard of the sweep index: runs due at ``now``."""
    return {
        "TableName": table,
        "IndexName": SWEEP_INDEX,
        "KeyConditionExpression": "sweep_shard = :shard AND sweep_at <= :now",
        "ExpressionAttributeValues": {":shard": s_attr(shard), ":now": n_attr(now)},
        "Limit": limit,
    }


def table_definition() -> Item:
    """The table's keys, attributes and indexes, as ``create_table`` creates them and
    template.yaml declares them (tests/infra compares the two)."""
    return {
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "sweep_shard", "AttributeType": "S"},
            {"AttributeName": "sweep_at", "AttributeType": "N"},
        ],
        "GlobalSecondaryIndexes": [sweep_index_definition()],
        "BillingMode": "PAY_PER_REQUEST",
    }


def sweep_index_definition() -> Item:
    """The sparse global secondary index, as ``create_table`` and template.yaml define it."""
    return {
        "IndexName": SWEEP_INDEX,
        "KeySchema": [
            {"AttributeName": "sweep_shard", "KeyType": "HASH"},
            {"AttributeName": "sweep_at", "KeyType": "RANGE"},
        ],
        # The sweeper re-reads each run consistently anyway: keys are all it needs.
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }


def create_run_thread_update(
    table: str,
    thread_id: str,
    *,
    owner: str,
    run_id: str,
    old_count: int,
    new_count: int,
    previous_active: str | None,
) -> Item:
    """The thread half of ``create_run``: the new message count and the new active run, on
    the count, owner and active run the creator read."""
    condition = "message_count = :old AND #owner = :owner AND "
    values: dict[str, Any] = {
        ":new": n_attr(new_count),
        ":old": n_attr(old_count),
        ":owner": s_attr(owner),
        ":run": s_attr(run_id),
    }
    if previous_active is None:
        condition += "attribute_not_exists(active_run)"
    else:
        condition += "active_run = :previous"
        values[":previous"] = s_attr(previous_active)
    return {
        "Update": {
            "TableName": table,
            "Key": codec.thread_key(thread_id),
            "UpdateExpression": "SET message_count = :new, active_run = :run",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#owner": "owner"},
            "ExpressionAttributeValues": values,
        }
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
    sets = []
    removes: list[str] = []
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
    if commit.final_status is not None:
        # The last turn ends the run and releases its lease in the same write.
        sets += ["#status = :final", "lease_until = :zero"]
        removes += ["lease_owner", *_SWEEP_ATTRS]
        values[":final"] = s_attr(commit.final_status.value)
        values[":zero"] = n_attr(0)
    sets += [
        "turn = :new_turn",
        "message_count = :new_count",
        "usage_in = usage_in + :din",
        "usage_out = usage_out + :dout",
        # Runs created before cache usage was recorded have no such attributes yet.
        "usage_cache_read = if_not_exists(usage_cache_read, :nil) + :dcr",
        "usage_cache_write = if_not_exists(usage_cache_write, :nil) + :dcw",
        "updated_at = :now",
    ]
    if commit.stop_reason is not None:
        sets.append("stop_reason = :stop")
        values[":stop"] = s_attr(commit.stop_reason)
    names = {"#status": "status"}
    if commit.error is not None:
        sets.append("#error = :error")
        values[":error"] = codec.error_attr(commit.error)
        names["#error"] = "error"
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
            "UpdateExpression": update_expression(sets, removes),
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
