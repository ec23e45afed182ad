"""Every condition and update expression the DynamoDB store sends (pure, no I/O).

Each builder returns the whole request (``PutItem``/``UpdateItem``/``Query`` arguments or
``TransactItems``), built from its parts: no caller writes or edits an expression string.
The conditions here are what fences a stale worker: tests/threads/test_expressions.py pins
them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import codec, rules
from awaken_s3.threads.codec import n_attr, s_attr
from awaken_s3.threads.models import (
    RunState,
    RunStatus,
    Thread,
    ToolCallRecord,
    ToolCallStatus,
    TurnCommit,
)

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.type_defs import GlobalSecondaryIndexTypeDef

Item = dict[str, Any]


def all_of(*clauses: str) -> str:
    return " AND ".join(clauses)


#: the sparse index of runs that have not ended (see docs/THREADS.md, "The sweeper")
SWEEP_INDEX: Final = "sweep"
_SWEEP_ATTRS: Final = ("sweep_shard", "sweep_at")
_RUNNABLE_VALUES: Final = {
    ":queued": s_attr(RunStatus.QUEUED.value),
    ":running": s_attr(RunStatus.RUNNING.value),
    ":suspended": s_attr(RunStatus.SUSPENDED.value),
}
_RUNNABLE_CONDITION: Final = "#status IN (:queued, :running, :suspended)"
_LEASE_HELD: Final = all_of("lease_owner = :me", "epoch = :epoch")
#: a renewal extends only a lease that has not run out: a holder that stalled past it (a GC
#: pause, a frozen container) may already have been replaced in the queue's eyes (its record
#: came back), so it must stop, not carry on under a lease the next delivery cannot see lost
_LEASE_LIVE: Final = all_of(_LEASE_HELD, "lease_until > :now")
_LEASE_DEAD: Final = "(attribute_not_exists(lease_owner) OR lease_until <= :now)"
#: a put that must create its item: a message position, a run, a thread, a tool-call claim
_NEW_ITEM: Final = "attribute_not_exists(pk)"
#: the attribute names that are DynamoDB reserved words, so expressions say ``#name``
_RESERVED: Final = ("#status", "#error", "#owner")


def update_expression(sets: Iterable[str], removes: Iterable[str] = ()) -> str:
    expression = "SET " + ", ".join(sets)
    removes = list(removes)
    if removes:
        expression += " REMOVE " + ", ".join(removes)
    return expression


def _names(*expressions: str) -> dict[str, str]:
    # DynamoDB rejects a name placeholder that no expression uses.
    text = " ".join(expressions)
    return {name: name[1:] for name in _RESERVED if name in text}


def _put_new(table: str, item: Item, *, return_old: bool = False) -> Item:
    """The body of a ``Put`` that must create ``item`` (its key must be free)."""
    put: Item = {"TableName": table, "Item": item, "ConditionExpression": _NEW_ITEM}
    if return_old:
        put["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return put


def create_thread_put(table: str, thread: Thread) -> Item:
    """``PutItem`` arguments of a new thread; fails when the id is taken."""
    return _put_new(table, codec.thread_item(thread))


def messages_query(table: str, thread_id: str) -> Item:
    """``Query`` arguments of a thread's messages, in order (the sort key is the position),
    read consistently: the committed history a worker resumes from."""
    return {
        "TableName": table,
        "KeyConditionExpression": all_of("pk = :pk", "begins_with(sk, :msg)"),
        "ExpressionAttributeValues": {
            ":pk": s_attr(codec.thread_pk(thread_id)),
            ":msg": s_attr(codec.MSG_PREFIX),
        },
        "ConsistentRead": True,
    }


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
        condition=all_of(
            _RUNNABLE_CONDITION,
            "(attribute_not_exists(lease_owner) OR lease_until <= :now OR lease_owner = :me)",
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
        condition=_LEASE_LIVE,
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
        condition=all_of(_LEASE_HELD, _RUNNABLE_CONDITION),
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
        condition=all_of(_LEASE_HELD, _RUNNABLE_CONDITION),
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
        all_of(
            "epoch = :epoch",
            "rescues = :rescues",
            "sweep_at <= :now",
            _RUNNABLE_CONDITION,
            _LEASE_DEAD,
        ),
        {
            ":epoch": n_attr(run.lease.epoch),
            ":rescues": n_attr(run.rescues),
            ":now": n_attr(now),
            **_RUNNABLE_VALUES,
        },
    )


def rescue_update(
    table: str, run: RunState, *, rescues: int, fruitless: int, now: float, next_in: float
) -> Item:
    condition, values = _sweep_condition(run, now)
    return _update_item(
        table,
        run.run_id,
        sets=(
            "rescues = :count",
            "fruitless_rescues = :fruitless",
            "rescue_mark = :mark",
            "rescue_epoch = :mark_epoch",
            "sweep_at = :sweep",
            "updated_at = :now",
        ),
        condition=condition,
        values={
            **values,
            ":count": n_attr(rescues),
            ":fruitless": n_attr(fruitless),
            ":mark": n_attr(run.message_count),
            ":mark_epoch": n_attr(run.lease.epoch),
            ":sweep": n_attr(now + next_in),
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
        "KeyConditionExpression": all_of("sweep_shard = :shard", "sweep_at <= :now"),
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


def sweep_index_definition() -> GlobalSecondaryIndexTypeDef:
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
    values: dict[str, Any] = {
        ":new": n_attr(new_count),
        ":old": n_attr(old_count),
        ":owner": s_attr(owner),
        ":run": s_attr(run_id),
    }
    if previous_active is None:
        active = "attribute_not_exists(active_run)"
    else:
        active = "active_run = :previous"
        values[":previous"] = s_attr(previous_active)
    update = update_expression(("message_count = :new", "active_run = :run"))
    condition = all_of("message_count = :old", "#owner = :owner", active)
    return {
        "Update": {
            "TableName": table,
            "Key": codec.thread_key(thread_id),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": _names(update, condition),
            "ExpressionAttributeValues": values,
        }
    }


def create_run_transaction(
    table: str,
    run: RunState,
    message_items: Sequence[Item],
    *,
    old_count: int,
    previous_active: str | None,
) -> list[Item]:
    """``TransactItems`` of ``create_run``: ``[run put, message puts..., thread update]``,
    then the put of the run's settings item when its system prompt is kept apart.

    The run id must be free (a taken one is told apart by the first cancellation reason);
    each message position must be free; the thread must still hold ``old_count`` messages,
    belong to the run's owner and name ``previous_active`` as its active run (the run the
    creator judged ended, or none), so two racing creates cannot both pass.
    """
    items = [
        {"Put": _put_new(table, codec.run_item(run))},
        *({"Put": _put_new(table, item)} for item in message_items),
        create_run_thread_update(
            table,
            run.thread_id,
            owner=run.owner,
            run_id=run.run_id,
            old_count=old_count,
            new_count=run.message_count,
            previous_active=previous_active,
        ),
    ]
    if codec.system_apart(run.settings):
        items.append({"Put": _put_new(table, codec.settings_item(run))})
    return items


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
    messages = [{"Put": _put_new(table, item, return_old=True)} for item in message_items]
    run = {
        "Update": {
            "TableName": table,
            "Key": codec.run_key(commit.run_id),
            "UpdateExpression": update_expression(sets, removes),
            "ConditionExpression": all_of(
                "epoch = :epoch", "turn = :turn", "message_count = :count", "#status = :running"
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


# -- tool calls: each claim and reclaim is ``[lease check, operation]``, one transaction

#: positions in a lease-checked transaction (and in its cancellation reasons)
LEASE_CHECK: Final = 0
OPERATION: Final = 1


def lease_check(table: str, run_id: str, epoch: int) -> Item:
    """A ``ConditionCheck`` that the run is still at ``epoch``: a worker fenced by a newer
    claim cannot claim (and so never starts) a tool call."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": codec.run_key(run_id),
            "ConditionExpression": "epoch = :epoch",
            "ExpressionAttributeValues": {":epoch": n_attr(epoch)},
        }
    }


def tool_claim_transaction(table: str, record: ToolCallRecord) -> list[Item]:
    """Claim a call before running it: the run at the claimer's epoch, the call unclaimed
    (on a lost condition the stored call comes back)."""
    return [
        lease_check(table, record.run_id, record.epoch),
        {"Put": _put_new(table, codec.tool_item(record), return_old=True)},
    ]


def tool_reclaim_transaction(
    table: str, run_id: str, tool_use_id: str, *, epoch: int, previous_epoch: int
) -> list[Item]:
    """Take over a call an earlier epoch claimed and never finished: the run at ``epoch``,
    the call still claimed (not finished) by ``previous_epoch``, so of two workers taking it
    over only one can."""
    update = update_expression(("epoch = :mine", "attempts = attempts + :one"))
    condition = all_of("#status = :claimed", "epoch = :prev")
    return [
        lease_check(table, run_id, epoch),
        {
            "Update": {
                "TableName": table,
                "Key": codec.tool_key(run_id, tool_use_id),
                "UpdateExpression": update,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": _names(update, condition),
                "ExpressionAttributeValues": {
                    ":mine": n_attr(epoch),
                    ":one": n_attr(1),
                    ":claimed": s_attr(ToolCallStatus.CLAIMED.value),
                    ":prev": n_attr(previous_epoch),
                },
            }
        },
    ]


def tool_finish_update(
    table: str, run_id: str, tool_use_id: str, *, epoch: int, content: str, is_error: bool
) -> Item:
    """``UpdateItem`` arguments recording a call's result: only while ``epoch`` holds the call
    and it is not finished, so a worker that lost the call cannot overwrite its result."""
    update = update_expression(("#status = :finished", "content = :content", "is_error = :err"))
    condition = all_of("#status = :claimed", "epoch = :epoch")
    return {
        "TableName": table,
        "Key": codec.tool_key(run_id, tool_use_id),
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": _names(update, condition),
        "ExpressionAttributeValues": {
            ":finished": s_attr(ToolCallStatus.FINISHED.value),
            ":content": s_attr(content),
            ":err": {"BOOL": is_error},
            ":claimed": s_attr(ToolCallStatus.CLAIMED.value),
            ":epoch": n_attr(epoch),
        },
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
