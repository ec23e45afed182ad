"""Every condition the thread store's writes carry, written once, as data (pure, no I/O).

They are boto3's condition objects (:mod:`boto3.dynamodb.conditions`): the DynamoDB store
compiles them with boto3's own expression builder, the in-memory store evaluates the same
objects over its items (:mod:`awaken_s3.threads.evaluate`), and both backends judge a lost
condition by evaluating one of its parts against the item as it was. So the rule that fences
a stale worker is stated in one place, and the two backends cannot disagree on it.

Values are the item's own types: strings, ints, and :class:`~decimal.Decimal` for times
(:func:`awaken_s3.threads.codec.number`), as DynamoDB stores them.
"""

from __future__ import annotations

from boto3.dynamodb.conditions import Attr, ConditionBase, Key

from awaken_s3.threads.codec import number
from awaken_s3.threads.models import (
    RUNNABLE_STATUSES,
    TERMINAL_STATUSES,
    RunState,
    RunStatus,
    ToolCallStatus,
    TurnCommit,
)


def _statuses(statuses: frozenset[RunStatus]) -> list[str]:
    return sorted(status.value for status in statuses)


def new_item() -> ConditionBase:
    """A put that must create its item: a message position, a run, a thread, a claim."""
    return Attr("pk").not_exists()


def runnable() -> ConditionBase:
    """The run has not ended: a worker may claim it, release it, finish it."""
    return Attr("status").is_in(_statuses(RUNNABLE_STATUSES))


def at_epoch(epoch: int) -> ConditionBase:
    """The run is still at the lease epoch ``epoch`` (a newer claim fences the older one)."""
    return Attr("epoch").eq(epoch)


def lease_held(worker: str, epoch: int) -> ConditionBase:
    return Attr("lease_owner").eq(worker) & at_epoch(epoch)


def lease_live(worker: str, epoch: int, now: float) -> ConditionBase:
    """A renewal extends only a lease that has not run out: a holder that stalled past it (a
    GC pause, a frozen container) may already have been replaced in the queue's eyes (its
    record came back), so it must stop, not carry on under a lease nobody can see is lost."""
    return lease_held(worker, epoch) & Attr("lease_until").gt(number(now))


def lease_dead(now: float) -> ConditionBase:
    return Attr("lease_owner").not_exists() | Attr("lease_until").lte(number(now))


def claimable(worker: str, now: float) -> ConditionBase:
    """A runnable run whose lease expired (or was never taken), or one this worker holds."""
    return runnable() & (lease_dead(now) | Attr("lease_owner").eq(worker))


def held_and_runnable(worker: str, epoch: int) -> ConditionBase:
    """A release or finish: only the holder, and only while the run has not ended."""
    return lease_held(worker, epoch) & runnable()


def released_by(epoch: int, status: RunStatus) -> ConditionBase:
    """What a release (or finish) to ``status`` by ``epoch`` leaves behind: how a retry
    whose first attempt landed (its response lost) recognises its own write."""
    return (
        Attr("lease_owner").not_exists()
        & at_epoch(epoch)
        & (Attr("status").eq(status.value) | Attr("status").is_in(_statuses(TERMINAL_STATUSES)))
    )


def sweep_holds(read: RunState, now: float) -> ConditionBase:
    """A sweeper's write (rescue or abandon) of the run as ``read``: still the same epoch and
    rescue count, still due, still runnable, and nobody holds a live lease."""
    return (
        at_epoch(read.lease.epoch)
        & Attr("rescues").eq(read.rescues)
        & Attr("sweep_at").lte(number(now))
        & runnable()
        & lease_dead(now)
    )


def commit_holds(commit: TurnCommit) -> ConditionBase:
    """The run as the committing worker holds it: its epoch, turn and message count, and
    still running."""
    return (
        at_epoch(commit.epoch)
        & Attr("turn").eq(commit.expected_turn)
        & Attr("message_count").eq(commit.expected_message_count)
        & Attr("status").eq(RunStatus.RUNNING.value)
    )


def thread_at(message_count: int) -> ConditionBase:
    return Attr("message_count").eq(message_count)


def thread_as_read(owner: str, message_count: int, active_run: str | None) -> ConditionBase:
    """The thread half of ``create_run``: the count, owner and active run the creator read
    (the run it judged ended, or none), so two racing creates cannot both pass."""
    active = (
        Attr("active_run").not_exists() if active_run is None else Attr("active_run").eq(active_run)
    )
    return thread_at(message_count) & Attr("owner").eq(owner) & active


def tool_held(epoch: int) -> ConditionBase:
    """A tool call still claimed (not finished) by ``epoch``: only that epoch records its
    result, and only a takeover of exactly that epoch's claim succeeds."""
    return Attr("status").eq(ToolCallStatus.CLAIMED.value) & at_epoch(epoch)


def tool_unfinished(epoch: int) -> ConditionBase:
    """A tool call ``epoch`` claimed that has no result: still claimed, or timed out (its
    outcome unknown either way). A takeover needs exactly this."""
    unfinished = [ToolCallStatus.CLAIMED.value, ToolCallStatus.TIMED_OUT.value]
    return Attr("status").is_in(unfinished) & at_epoch(epoch)


def tool_timed_out(epoch: int) -> ConditionBase:
    """The time-out ``epoch`` recorded: a repeated time-out whose first attempt landed."""
    return Attr("status").eq(ToolCallStatus.TIMED_OUT.value) & at_epoch(epoch)


def legacy_not_this_call(name: str, turn: int) -> ConditionBase:
    """Nothing at a call's legacy key (``TOOL#<id>``, the layout before the turn was part of
    the key) that may be this call's: no item, a record of another tool, or a record another
    turn's call already took over. The id alone repeats from turn to turn on some providers,
    so a record of another tool there is another call's."""
    return (
        Attr("pk").not_exists()
        | Attr("call_id").exists()
        | Attr("name").ne(name)
        | (Attr("adopted_turn").exists() & Attr("adopted_turn").ne(turn))
    )


def legacy_adoptable(name: str, turn: int) -> ConditionBase:
    """A legacy record of the same tool that no other turn's call took over: it may be this
    call's, started before the upgrade."""
    return (
        Attr("pk").exists()
        & Attr("call_id").not_exists()
        & Attr("name").eq(name)
        & (Attr("adopted_turn").not_exists() | Attr("adopted_turn").eq(turn))
    )


def tool_finished(epoch: int, content: str, is_error: bool) -> ConditionBase:
    """The result ``epoch`` recorded: a repeated finish whose first attempt landed."""
    return (
        Attr("status").eq(ToolCallStatus.FINISHED.value)
        & at_epoch(epoch)
        & Attr("content").eq(content)
        & Attr("is_error").eq(is_error)
    )


def messages_of(thread_pk: str, prefix: str) -> ConditionBase:
    """The key condition of a thread's messages, in order."""
    return Key("pk").eq(thread_pk) & Key("sk").begins_with(prefix)


def due_in_shard(shard: str, now: float) -> ConditionBase:
    """The key condition of one shard of the sweep index: runs due at ``now``."""
    return Key("sweep_shard").eq(shard) & Key("sweep_at").lte(number(now))
