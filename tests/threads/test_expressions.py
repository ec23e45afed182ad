"""The conditions that fence a stale worker, as sent to DynamoDB (pure, no AWS).

Each write is data (awaken_s3.threads.writes) whose condition boto3's expression builder
compiles; the tests read the compiled request back with its placeholders resolved, so they
pin what DynamoDB is asked to check, whatever the builder names its placeholders.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import ClassifiedError, Usage
from awaken_s3.threads import (
    Lease,
    RunStatus,
    Thread,
    ToolCallRecord,
    ToolCallStatus,
    TurnCommit,
    codec,
    writes,
)
from awaken_s3.threads.expressions import (
    query_request,
    single_write_request,
    transact_items,
)
from tests.fixtures.runs import run_state

#: a run mid-way: three turns and five messages committed, held by w1 at epoch 7
BASE = run_state(
    status=RunStatus.RUNNING,
    turn=3,
    message_count=5,
    usage=Usage(100, 50),
    lease=Lease("w1", 7, 100.0),
)
TABLE = "tbl"


def items_for(commit: TurnCommit) -> list[dict[str, object]]:
    return [
        codec.message_item(
            "t1", 5 + i, m, commit_id=commit.commit_id, now=1.0, body=None, body_ref=None
        )
        for i, m in enumerate(commit.messages)
    ]


def _value(attr: dict[str, Any]) -> str:
    kind, value = next(iter(attr.items()))
    if kind == "S":
        return repr(value)
    if kind == "N":
        return str(value)
    return f"{kind}:{value}"


def rendered(request: dict[str, Any], field: str) -> str:
    """``field`` of ``request`` with each placeholder replaced by its name or value."""
    text = str(request[field])
    names = request.get("ExpressionAttributeNames", {})
    values = request.get("ExpressionAttributeValues", {})
    text = re.sub(r"#\w+", lambda m: names[m.group()], text)
    return re.sub(r":\w+", lambda m: _value(values[m.group()]), text)


def body(item: dict[str, Any]) -> dict[str, Any]:
    """The body of a transact item (or a single request as is)."""
    for kind in ("Put", "Update", "ConditionCheck"):
        if kind in item:
            found: dict[str, Any] = item[kind]
            return found
    return item


RUNNABLE = "status IN ('queued', 'running', 'suspended')"
HELD = "lease_owner = 'w1' AND epoch = 7"


def test_commit_puts_each_message_at_a_free_position_and_pins_the_run() -> None:
    commit = TurnCommit(
        base=BASE,
        messages=(Message.assistant("a"), Message.user("b")),
        usage=Usage(3, 4),
        stop_reason="tool_use",
    )
    transact = transact_items(TABLE, writes.commit(commit, items_for(commit), now=9.0))
    puts, run, thread = transact[:2], body(transact[2]), body(transact[3])
    assert [p["Put"]["Item"]["sk"] for p in puts] == [
        {"S": "MSG#0000000005"},
        {"S": "MSG#0000000006"},
    ]
    assert all(
        rendered(p["Put"], "ConditionExpression") == "attribute_not_exists(pk)" for p in puts
    )
    assert all(p["Put"]["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD" for p in puts)
    assert run["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    assert rendered(run, "ConditionExpression") == (
        "(((epoch = 7 AND turn = 3) AND message_count = 5) AND status = 'running')"
    )
    update = rendered(run, "UpdateExpression")
    assert "turn = 4" in update and "message_count = 7" in update
    assert "usage_in = if_not_exists(usage_in, 0) + 3" in update
    assert "usage_out = if_not_exists(usage_out, 0) + 4" in update
    assert "REMOVE" not in update
    assert rendered(thread, "ConditionExpression") == "message_count = 5"
    assert rendered(thread, "UpdateExpression") == "SET message_count = 7"


def test_a_tool_results_commit_keeps_the_turn_and_a_final_commit_releases_the_lease() -> None:
    results = TurnCommit(base=BASE, messages=(Message.user("r"),), advance_turn=False)
    run = body(transact_items(TABLE, writes.commit(results, items_for(results), now=1.0))[1])
    assert "turn = 3," in rendered(run, "UpdateExpression")
    final = TurnCommit(
        base=BASE, messages=(Message.assistant("x"),), final_status=RunStatus.COMPLETED
    )
    run = body(transact_items(TABLE, writes.commit(final, items_for(final), now=1.0))[1])
    update = rendered(run, "UpdateExpression")
    assert "status = 'completed'" in update and "lease_until = 0" in update
    # ... and takes the run out of the sweeper's sparse index in the same write.
    assert update.endswith("REMOVE lease_owner, sweep_shard, sweep_at")


def test_claim_requires_a_runnable_run_and_a_free_expired_or_own_lease() -> None:
    claim = writes.claim("r1", worker="w2", now=50.0, lease_seconds=30.0, grace=30.0)
    request = single_write_request(TABLE, claim)
    assert rendered(request, "ConditionExpression") == (
        f"({RUNNABLE} AND ((attribute_not_exists(lease_owner) OR lease_until <= 50.000000) "
        "OR lease_owner = 'w2'))"
    )
    update = rendered(request, "UpdateExpression")
    assert "epoch = if_not_exists(epoch, 0) + 1" in update
    # An update's operands read the item as it was: the replaced lease's expiry.
    assert "previous_lease_until = lease_until" in update
    assert "lease_until = 80.000000" in update and "sweep_at = 110.000000" in update
    assert request["ReturnValues"] == "ALL_NEW"


# -- every write that fences a stale worker, as a table: the write, the item it conditions,
# -- and the condition DynamoDB checks, placeholders resolved

ERROR = ClassifiedError(code="abandoned", message="nobody drove it", retryable=False)
SWEPT = dataclasses.replace(BASE, status=RunStatus.SUSPENDED, lease=Lease(None, 7, 0.0), rescues=2)
RECORD = ToolCallRecord("r1", "call-1", "add", ToolCallStatus.CLAIMED, 7, turn=3, input_digest="d1")
SWEEP_HOLDS = (
    "((((epoch = 7 AND rescues = 2) AND sweep_at <= 500.000000) AND "
    f"{RUNNABLE}) AND (attribute_not_exists(lease_owner) OR lease_until <= 500.000000))"
)

FENCES: list[tuple[str, writes.Write, dict[str, Any], str]] = [
    (
        "renew: only the lease holder at its epoch, and only while its lease is live",
        writes.renew("r1", worker="w1", epoch=7, now=10.0, lease_seconds=30.0, grace=30.0),
        codec.run_key("r1"),
        f"(({HELD}) AND lease_until > 10.000000)",
    ),
    (
        "release: only the holder, and only while the run has not ended",
        writes.release(
            "r1",
            worker="w1",
            epoch=7,
            now=10.0,
            status=RunStatus.SUSPENDED,
            idle_suspensions=1,
            grace=30.0,
        ),
        codec.run_key("r1"),
        f"(({HELD}) AND {RUNNABLE})",
    ),
    (
        "finish: only the holder, and only while the run has not ended",
        writes.finish("r1", worker="w1", epoch=7, now=10.0, status=RunStatus.FAILED, error=ERROR),
        codec.run_key("r1"),
        f"(({HELD}) AND {RUNNABLE})",
    ),
    (
        "drop the lease of an ended run: only the holder",
        writes.drop_lease("r1", worker="w1", epoch=7, now=10.0),
        codec.run_key("r1"),
        f"({HELD})",
    ),
    (
        "cancel: only a run that has not ended",
        writes.cancel("r1", now=10.0),
        codec.run_key("r1"),
        RUNNABLE,
    ),
    (
        "rescue: the run exactly as the sweeper read it, due, and nobody holding it",
        writes.rescue(SWEPT, rescues=3, fruitless=1, now=500.0, next_in=120.0),
        codec.run_key("r1"),
        SWEEP_HOLDS,
    ),
    (
        "abandon: the same as a rescue",
        writes.abandon(SWEPT, error=ERROR, now=500.0),
        codec.run_key("r1"),
        SWEEP_HOLDS,
    ),
    (
        "a new thread: its id free",
        writes.create_thread(Thread("t1", "o")),
        codec.thread_key("t1"),
        "attribute_not_exists(pk)",
    ),
    (
        "the lease check of a tool-call claim: the run still at the claimer's epoch",
        writes.lease_check("r1", 7),
        codec.run_key("r1"),
        "epoch = 7",
    ),
    (
        "a tool-call claim: the call not claimed yet",
        writes.tool_claim(RECORD)[writes.OPERATION],
        codec.tool_key("r1", "call-1", 3),
        "attribute_not_exists(pk)",
    ),
    (
        "a tool-call takeover: still without a result, by the epoch that was seen dead",
        writes.tool_reclaim("r1", "call-1", turn=3, epoch=8, previous_epoch=7)[writes.OPERATION],
        codec.tool_key("r1", "call-1", 3),
        "(status IN ('claimed', 'timed_out') AND epoch = 7)",
    ),
    (
        "a tool-call time-out: still claimed, by this epoch",
        writes.tool_time_out("r1", "call-1", turn=3, epoch=8),
        codec.tool_key("r1", "call-1", 3),
        "(status = 'claimed' AND epoch = 8)",
    ),
    (
        "a tool-call claim's look at the legacy key: nothing there that may be this call",
        writes.tool_claim(RECORD)[writes.LEGACY],
        codec.tool_key("r1", "call-1", None),
        "(((attribute_not_exists(pk) OR attribute_exists(call_id)) OR name <> 'add') OR "
        "(attribute_exists(adopted_turn) AND adopted_turn <> 3))",
    ),
    (
        "an adoption of a legacy record: the same tool, taken over by no other turn",
        writes.tool_adopt(dataclasses.replace(RECORD, adopted=True))[writes.LEGACY],
        codec.tool_key("r1", "call-1", None),
        "(((attribute_exists(pk) AND attribute_not_exists(call_id)) AND name = 'add') AND "
        "(attribute_not_exists(adopted_turn) OR adopted_turn = 3))",
    ),
    (
        "a tool-call result: still claimed, by this epoch",
        writes.tool_finish("r1", "call-1", turn=3, epoch=8, content="3", is_error=False),
        codec.tool_key("r1", "call-1", 3),
        "(status = 'claimed' AND epoch = 8)",
    ),
]


@pytest.mark.parametrize(
    ("write", "key", "condition"), [pytest.param(*row[1:], id=row[0]) for row in FENCES]
)
def test_each_write_is_conditioned_on_what_its_writer_holds(
    write: writes.Write, key: dict[str, Any], condition: str
) -> None:
    request = body(transact_items(TABLE, [write])[0])
    target = request["Key"] if "Key" in request else {k: request["Item"][k] for k in ("pk", "sk")}
    assert target == codec.to_wire(key)
    assert rendered(request, "ConditionExpression") == condition


def test_tool_claims_are_checked_against_the_run_epoch_in_the_same_transaction() -> None:
    claim = transact_items(TABLE, writes.tool_claim(RECORD))
    assert [next(iter(item)) for item in claim] == ["ConditionCheck", "Put", "ConditionCheck"]
    # The call's key is its run, its turn and its id; the record names its tool and input.
    assert claim[writes.OPERATION]["Put"]["Item"]["sk"] == {"S": "TOOL#0000000003#call-1"}
    assert claim[writes.OPERATION]["Put"]["Item"]["name"] == {"S": "add"}
    assert claim[writes.OPERATION]["Put"]["Item"]["input_digest"] == {"S": "d1"}
    # A legacy record that may be this call's comes back, for the adoption to judge.
    assert (
        claim[writes.LEGACY]["ConditionCheck"]["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    )
    # A lost claim returns the stored call: who holds it, and whether it finished.
    assert claim[writes.OPERATION]["Put"]["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    assert claim[writes.OPERATION]["Put"]["Item"]["epoch"] == {"N": "7"}
    takeover = writes.tool_reclaim("r1", "call-1", turn=3, epoch=8, previous_epoch=7)
    # The takeover is fenced by the taker's epoch, not the dead claimer's.
    assert takeover[writes.LEASE_CHECK] == writes.lease_check("r1", 8)


@pytest.mark.parametrize(
    ("previous_active", "active_clause"),
    [(None, "attribute_not_exists(active_run)"), ("r0", "active_run = 'r0'")],
)
def test_create_run_pins_the_thread_as_read(
    previous_active: str | None, active_clause: str
) -> None:
    run = dataclasses.replace(BASE, status=RunStatus.QUEUED, lease=Lease(), message_count=7)
    commit = TurnCommit(base=BASE, messages=(Message.user("a"), Message.user("b")))
    transact = transact_items(
        TABLE,
        writes.create_run(run, items_for(commit), old_count=5, previous_active=previous_active),
    )
    run_put, *message_puts, thread = transact
    # The run id must be free: a taken one is the first cancellation reason (RunExists).
    assert run_put["Put"]["Item"]["pk"] == {"S": "RUN#r1"}
    assert rendered(run_put["Put"], "ConditionExpression") == "attribute_not_exists(pk)"
    assert len(message_puts) == 2
    update = thread["Update"]
    assert update["Key"] == codec.to_wire(codec.thread_key("t1"))
    assert rendered(update, "ConditionExpression") == (
        f"((message_count = 5 AND owner = {BASE.owner!r}) AND {active_clause})"
    )
    assert rendered(update, "UpdateExpression") == "SET message_count = 7, active_run = 'r1'"


def _requests() -> list[dict[str, Any]]:
    commit = TurnCommit(
        base=BASE,
        messages=(Message.assistant("a"),),
        final_status=RunStatus.FAILED,
        error=ERROR,
        stop_reason="refusal",
    )
    sent = [body(item) for item in transact_items(TABLE, [row[1] for row in FENCES])]
    sent += [body(item) for item in transact_items(TABLE, writes.commit(commit, [], now=1.0))]
    sent += [
        body(item)
        for item in transact_items(
            TABLE, writes.create_run(BASE, [], old_count=5, previous_active="r0")
        )
    ]
    sent += [
        single_write_request(
            TABLE, writes.claim("r1", worker="w", now=1.0, lease_seconds=2.0, grace=3.0)
        ),
        query_request(TABLE, writes.messages("t1")),
        query_request(TABLE, writes.stalled("0", now=1.0, limit=10)),
    ]
    return sent


@pytest.mark.parametrize("request_", _requests())
def test_every_placeholder_is_defined_and_every_definition_used(request_: dict[str, Any]) -> None:
    # DynamoDB rejects both an undefined placeholder and an unused definition.
    text = " ".join(
        request_[name]
        for name in ("ConditionExpression", "UpdateExpression", "KeyConditionExpression")
        if name in request_
    )
    assert set(re.findall(r":\w+", text)) == set(request_.get("ExpressionAttributeValues", {}))
    assert set(re.findall(r"#\w+", text)) == set(request_.get("ExpressionAttributeNames", {}))


def test_the_queries_read_a_thread_in_order_and_one_shard_of_the_sweep_index() -> None:
    messages = query_request(TABLE, writes.messages("t1"))
    assert rendered(messages, "KeyConditionExpression") == (
        "(pk = 'THREAD#t1' AND begins_with(sk, 'MSG#'))"
    )
    assert messages["ConsistentRead"] is True
    stalled = query_request(TABLE, writes.stalled("3", now=9.5, limit=10))
    assert rendered(stalled, "KeyConditionExpression") == (
        "(sweep_shard = '3' AND sweep_at <= 9.500000)"
    )
    assert (stalled["IndexName"], stalled["Limit"]) == ("sweep", 10)
