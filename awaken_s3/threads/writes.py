"""Every write and query of the thread store, as data (pure, no I/O).

Each builder returns what one operation writes: the item or key, the update (attributes set,
added to, copied, removed) and the condition (:mod:`awaken_s3.threads.conditions`). The
DynamoDB store compiles these into requests (:mod:`awaken_s3.threads.expressions`); the
in-memory store applies them (:mod:`awaken_s3.threads.evaluate`). Items hold the values
DynamoDB stores (:mod:`awaken_s3.threads.codec`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from boto3.dynamodb.conditions import ConditionBase

from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.threads import codec, rules
from awaken_s3.threads import conditions as cond
from awaken_s3.threads.codec import number
from awaken_s3.threads.models import (
    RunState,
    RunStatus,
    Thread,
    ToolCallRecord,
    ToolCallStatus,
    TurnCommit,
)

Item = dict[str, Any]

#: the sparse index of runs that have not ended (see docs/THREADS.md, "The sweeper")
SWEEP_INDEX: Final = "sweep"
SWEEP_ATTRS: Final = ("sweep_shard", "sweep_at")


@dataclass(frozen=True, slots=True)
class Add:
    """``attribute = attribute + amount``, an absent attribute counting as 0 (runs stored
    before an attribute existed have none)."""

    amount: int | Decimal


@dataclass(frozen=True, slots=True)
class CopyOf:
    """``attribute = source``, read as the item was before the update."""

    source: str


@dataclass(frozen=True, slots=True)
class Put:
    item: Item
    condition: ConditionBase | None = None
    #: on a lost condition, report the stored item (DynamoDB's ``ALL_OLD``)
    return_old: bool = False

    @property
    def key(self) -> Item:
        return {"pk": self.item["pk"], "sk": self.item["sk"]}


@dataclass(frozen=True, slots=True)
class Update:
    key: Item
    #: attribute -> a value, an :class:`Add` or a :class:`CopyOf`
    set: Mapping[str, Any]
    condition: ConditionBase | None = None
    remove: tuple[str, ...] = ()
    return_old: bool = True


@dataclass(frozen=True, slots=True)
class Check:
    """A transaction's ``ConditionCheck``: the item must satisfy ``condition``."""

    key: Item
    condition: ConditionBase
    return_old: bool = False


Write = Put | Update | Check


@dataclass(frozen=True, slots=True)
class Query:
    key_condition: ConditionBase
    #: the attribute the results are ordered by (the table's or the index's sort key)
    sort_key: str = "sk"
    index: str | None = None
    limit: int | None = None
    consistent: bool = False
    #: for an index: the attributes an item needs to be in it (the index is sparse)
    index_keys: tuple[str, ...] = field(default=())


def new(item: Item, *, return_old: bool = False) -> Put:
    return Put(item, cond.new_item(), return_old=return_old)


def create_thread(thread: Thread) -> Put:
    return new(codec.thread_item(thread))


def messages(thread_id: str) -> Query:
    """A thread's messages, in order (the sort key is the position), read consistently:
    the committed history a worker resumes from."""
    return Query(cond.messages_of(codec.thread_pk(thread_id), codec.MSG_PREFIX), consistent=True)


def stalled(shard: str, *, now: float, limit: int) -> Query:
    """One shard of the sweep index: runs due at ``now``."""
    return Query(
        cond.due_in_shard(shard, now),
        sort_key="sweep_at",
        index=SWEEP_INDEX,
        limit=limit,
        index_keys=SWEEP_ATTRS,
    )


def claim(run_id: str, *, worker: str, now: float, lease_seconds: float, grace: float) -> Update:
    """A lease claim; the epoch grows by one on every claim, even a re-claim by the same
    worker id (a restarted process reusing its id still fences its earlier incarnation).
    ``previous_lease_until`` keeps the replaced lease's expiry."""
    until = now + lease_seconds
    return Update(
        codec.run_key(run_id),
        {
            "lease_owner": worker,
            "epoch": Add(1),
            "previous_lease_until": CopyOf("lease_until"),
            "lease_until": number(until),
            "status": RunStatus.RUNNING.value,
            "updated_at": number(now),
            "sweep_shard": rules.sweep_shard(run_id),
            "sweep_at": number(until + grace),
        },
        cond.claimable(worker, now),
    )


def renew(
    run_id: str, *, worker: str, epoch: int, now: float, lease_seconds: float, grace: float
) -> Update:
    until = now + lease_seconds
    return Update(
        codec.run_key(run_id),
        {
            "lease_until": number(until),
            "updated_at": number(now),
            "sweep_at": number(until + grace),
        },
        cond.lease_live(worker, epoch, now),
    )


def release(
    run_id: str,
    *,
    worker: str,
    epoch: int,
    now: float,
    status: RunStatus,
    idle_suspensions: int,
    grace: float,
) -> Update:
    """Give the lease up, leaving ``status``; only while the run has not ended."""
    return Update(
        codec.run_key(run_id),
        {
            "status": status.value,
            "lease_until": 0,
            "updated_at": number(now),
            # The caller is about to send the message that drives the run next.
            "sweep_at": number(now + grace),
            "idle_suspensions": idle_suspensions,
        },
        cond.held_and_runnable(worker, epoch),
        remove=("lease_owner",),
    )


def drop_lease(run_id: str, *, worker: str, epoch: int, now: float) -> Update:
    """Let the lease of an ended run go (a cancel landed while the worker held it): the
    status it ended with stands."""
    return Update(
        codec.run_key(run_id),
        {"lease_until": 0, "updated_at": number(now)},
        cond.lease_held(worker, epoch),
        remove=("lease_owner", *SWEEP_ATTRS),
    )


def finish(
    run_id: str,
    *,
    worker: str,
    epoch: int,
    now: float,
    status: RunStatus,
    error: ClassifiedError | None,
) -> Update:
    """End the run with a terminal ``status``; only while it has not ended already."""
    sets: Item = {"status": status.value, "lease_until": 0, "updated_at": number(now)}
    if error is not None:
        sets["error"] = codec.error_map(error)
    return Update(
        codec.run_key(run_id),
        sets,
        cond.held_and_runnable(worker, epoch),
        remove=("lease_owner", *SWEEP_ATTRS),
    )


def cancel(run_id: str, *, now: float) -> Update:
    return Update(
        codec.run_key(run_id),
        {"status": RunStatus.CANCELLED.value, "updated_at": number(now)},
        cond.runnable(),
        remove=SWEEP_ATTRS,
    )


def rescue(run: RunState, *, rescues: int, fruitless: int, now: float, next_in: float) -> Update:
    return Update(
        codec.run_key(run.run_id),
        {
            "rescues": rescues,
            "fruitless_rescues": fruitless,
            "rescue_mark": run.message_count,
            "rescue_epoch": run.lease.epoch,
            "sweep_at": number(now + next_in),
            "updated_at": number(now),
        },
        cond.sweep_holds(run, now),
    )


def abandon(run: RunState, *, error: ClassifiedError, now: float) -> Update:
    return Update(
        codec.run_key(run.run_id),
        {
            "status": RunStatus.FAILED.value,
            "error": codec.error_map(error),
            "lease_until": 0,
            "updated_at": number(now),
        },
        cond.sweep_holds(run, now),
        remove=("lease_owner", *SWEEP_ATTRS),
    )


def create_run(
    run: RunState, message_items: Sequence[Item], *, old_count: int, previous_active: str | None
) -> list[Write]:
    """``create_run``'s transaction: ``[run put, message puts..., thread update]``, then the
    put of the run's settings item when its system prompt is kept apart.

    The run id must be free (a taken one is told apart by the first cancellation reason);
    each message position must be free; the thread must be as the creator read it.
    """
    writes: list[Write] = [
        new(codec.run_item(run)),
        *(new(item) for item in message_items),
        Update(
            codec.thread_key(run.thread_id),
            {"message_count": run.message_count, "active_run": run.run_id},
            cond.thread_as_read(run.owner, old_count, previous_active),
            return_old=False,
        ),
    ]
    if codec.system_apart(run.settings):
        writes.append(new(codec.settings_item(run)))
    return writes


def commit(commit: TurnCommit, message_items: Sequence[Item], *, now: float) -> list[Write]:
    """A turn commit's transaction: ``[message puts..., run update, thread update]``.

    Each message put requires its position to be free, the run update the committing
    worker's view of the run (:func:`~awaken_s3.threads.conditions.commit_holds`), the thread
    update the expected message count. Every item but the thread returns its stored value on
    a lost condition, for :func:`awaken_s3.threads.cancellation.diagnose_commit`.
    """
    after = rules.apply_commit(commit, now=now)
    usage = commit.usage
    sets: Item = {
        "turn": after.turn,
        "message_count": after.message_count,
        "usage_in": Add(usage.input_tokens),
        "usage_out": Add(usage.output_tokens),
        "usage_cache_read": Add(usage.cache_read_tokens),
        "usage_cache_write": Add(usage.cache_write_tokens),
        "updated_at": number(after.updated_at),
    }
    removes: tuple[str, ...] = ()
    if commit.final_status is not None:
        # The last turn ends the run and releases its lease in the same write.
        sets |= {"status": commit.final_status.value, "lease_until": 0}
        removes = ("lease_owner", *SWEEP_ATTRS)
    if commit.stop_reason is not None:
        sets["stop_reason"] = commit.stop_reason
    if commit.error is not None:
        sets["error"] = codec.error_map(commit.error)
    return [
        *(new(item, return_old=True) for item in message_items),
        Update(codec.run_key(commit.run_id), sets, cond.commit_holds(commit), remove=removes),
        Update(
            codec.thread_key(commit.thread_id),
            {"message_count": after.message_count},
            cond.thread_at(commit.expected_message_count),
            return_old=False,
        ),
    ]


# -- tool calls: each claim and reclaim is ``[lease check, operation]``, one transaction

#: positions in a lease-checked transaction (and in its cancellation reasons)
LEASE_CHECK: Final = 0
OPERATION: Final = 1
#: a claim's check of the call's legacy key (``TOOL#<id>``), or an adoption's update of it
LEGACY: Final = 2


def lease_check(run_id: str, epoch: int) -> Check:
    """The run still at ``epoch``: a worker fenced by a newer claim cannot claim (and so
    never starts) a tool call."""
    return Check(codec.run_key(run_id), cond.at_epoch(epoch))


def _legacy_key(record: ToolCallRecord) -> Item:
    return codec.tool_key(record.run_id, record.tool_use_id, None)


def tool_claim(record: ToolCallRecord) -> list[Write]:
    """Claim a call before running it: the run at the claimer's epoch, the call unclaimed
    (on a lost condition the stored call comes back), and nothing at its legacy key that may
    be this very call, started before the upgrade (on a lost condition that record comes
    back: :func:`tool_adopt` takes it over)."""
    assert record.turn is not None, "new claims use the (run, turn, call) key"
    return [
        lease_check(record.run_id, record.epoch),
        new(codec.tool_item(record), return_old=True),
        Check(
            _legacy_key(record),
            cond.legacy_not_this_call(record.name, record.turn),
            return_old=True,
        ),
    ]


def tool_claim_plain(record: ToolCallRecord) -> list[Write]:
    """A claim that no longer asks about the legacy key (it holds another call's record)."""
    return tool_claim(record)[:LEGACY]


def tool_adopt(record: ToolCallRecord) -> list[Write]:
    """Claim a call whose legacy record (the same tool, not taken over by another turn) may
    be its own: the new record, marked ``adopted`` (its outcome unknown), and the legacy
    record bound to this turn, so no later turn's call with the same id takes it for its own.
    """
    assert record.turn is not None and record.adopted
    return [
        lease_check(record.run_id, record.epoch),
        new(codec.tool_item(record), return_old=True),
        Update(
            _legacy_key(record),
            {"adopted_turn": record.turn},
            cond.legacy_adoptable(record.name, record.turn),
        ),
    ]


def tool_reclaim(
    run_id: str, tool_use_id: str, *, turn: int, epoch: int, previous_epoch: int
) -> list[Write]:
    """Take over a call an earlier epoch claimed and never finished (still claimed, or timed
    out): the run at ``epoch``, the call still ``previous_epoch``'s, so of two workers taking
    it over only one can."""
    return [
        lease_check(run_id, epoch),
        Update(
            codec.tool_key(run_id, tool_use_id, turn),
            {"epoch": epoch, "attempts": Add(1), "status": ToolCallStatus.CLAIMED.value},
            cond.tool_unfinished(previous_epoch),
        ),
    ]


def tool_time_out(run_id: str, tool_use_id: str, *, turn: int, epoch: int) -> Update:
    """Record that ``epoch``'s attempt at a call ran out of time: its outcome is unknown (the
    next epoch judges it like a dead worker's claim), and one more time-out is counted."""
    return Update(
        codec.tool_key(run_id, tool_use_id, turn),
        {"status": ToolCallStatus.TIMED_OUT.value, "timeouts": Add(1)},
        cond.tool_held(epoch),
    )


def tool_finish(
    run_id: str,
    tool_use_id: str,
    *,
    turn: int,
    epoch: int,
    content: str,
    is_error: bool,
    timed_out: bool = False,
) -> Update:
    """Record a call's result: only while ``epoch`` holds the call and it is not finished,
    so a worker that lost the call cannot overwrite its result. ``timed_out``: the result
    says the attempt ran out of time (one more time-out is counted)."""
    sets: Item = {"status": ToolCallStatus.FINISHED.value, "content": content, "is_error": is_error}
    if timed_out:
        sets["timeouts"] = Add(1)
    return Update(codec.tool_key(run_id, tool_use_id, turn), sets, cond.tool_held(epoch))


def tool_calls(run_id: str) -> Query:
    """Every tool-call record of a run (legacy ones too), by sort key."""
    return Query(cond.messages_of(codec.run_pk(run_id), codec.TOOL_PREFIX), consistent=True)
