"""The conditions that fence a stale worker, as sent to DynamoDB (pure, no AWS)."""

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
)
from awaken_s3.threads.expressions import (
    LEASE_CHECK,
    OPERATION,
    abandon_update,
    cancel_update,
    claim_update,
    commit_transaction,
    create_run_transaction,
    create_thread_put,
    drop_lease_update,
    finish_update,
    lease_check,
    messages_query,
    release_update,
    renew_update,
    rescue_update,
    stalled_query,
    tool_claim_transaction,
    tool_finish_update,
    tool_reclaim_transaction,
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


def items_for(commit: TurnCommit) -> list[dict[str, object]]:
    return [
        codec.message_item(
            "t1", 5 + i, m, commit_id=commit.commit_id, now=1.0, body=None, body_ref=None
        )
        for i, m in enumerate(commit.messages)
    ]


def test_commit_puts_each_message_at_a_free_position_and_pins_the_run() -> None:
    commit = TurnCommit(
        base=BASE,
        messages=(Message.assistant("a"), Message.user("b")),
        usage=Usage(3, 4),
        stop_reason="tool_use",
    )
    transact = commit_transaction("tbl", commit, items_for(commit), now=9.0)
    puts, run, thread = transact[:2], transact[2], transact[3]
    assert [p["Put"]["Item"]["sk"] for p in puts] == [
        {"S": "MSG#0000000005"},
        {"S": "MSG#0000000006"},
    ]
    assert all(p["Put"]["ConditionExpression"] == "attribute_not_exists(pk)" for p in puts)
    assert all(p["Put"]["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD" for p in puts)
    update = run["Update"]
    assert update["ConditionExpression"] == (
        "epoch = :epoch AND turn = :turn AND message_count = :count AND #status = :running"
    )
    values = update["ExpressionAttributeValues"]
    assert (values[":epoch"], values[":turn"], values[":count"]) == (
        {"N": "7"},
        {"N": "3"},
        {"N": "5"},
    )
    assert (values[":new_turn"], values[":new_count"]) == ({"N": "4"}, {"N": "7"})
    assert (values[":din"], values[":dout"]) == ({"N": "3"}, {"N": "4"})
    assert "REMOVE lease_owner" not in update["UpdateExpression"]
    assert thread["Update"]["ConditionExpression"] == "message_count = :count"


def test_a_tool_results_commit_keeps_the_turn_and_a_final_commit_releases_the_lease() -> None:
    results = TurnCommit(base=BASE, messages=(Message.user("r"),), advance_turn=False)
    run = commit_transaction("tbl", results, items_for(results), now=1.0)[1]["Update"]
    assert run["ExpressionAttributeValues"][":new_turn"] == {"N": "3"}
    final = TurnCommit(
        base=BASE, messages=(Message.assistant("x"),), final_status=RunStatus.COMPLETED
    )
    run = commit_transaction("tbl", final, items_for(final), now=1.0)[1]["Update"]
    assert run["UpdateExpression"].startswith("SET #status = :final, lease_until = :zero")
    # ... and takes the run out of the sweeper's sparse index in the same write.
    assert run["UpdateExpression"].endswith("REMOVE lease_owner, sweep_shard, sweep_at")
    assert run["ExpressionAttributeValues"][":final"] == {"S": "completed"}


def test_claim_requires_a_runnable_run_and_a_free_expired_or_own_lease() -> None:
    args = claim_update("tbl", "r1", worker="w2", now=50.0, lease_seconds=30.0)
    assert args["ConditionExpression"] == (
        "#status IN (:queued, :running, :suspended) AND "
        "(attribute_not_exists(lease_owner) OR lease_until <= :now OR lease_owner = :me)"
    )
    assert "epoch = epoch + :one" in args["UpdateExpression"]
    values = args["ExpressionAttributeValues"]
    assert (values[":until"], values[":now"], values[":me"]) == (
        {"N": "80.000000"},
        {"N": "50.000000"},
        {"S": "w2"},
    )


# -- every write that fences a stale worker, as a table: the request, the item it conditions,
# -- the condition, and the values that pin it to what the writer read or holds

ERROR = ClassifiedError(code="abandoned", message="nobody drove it", retryable=False)
SWEPT = dataclasses.replace(BASE, status=RunStatus.SUSPENDED, lease=Lease(None, 7, 0.0), rescues=2)
RECORD = ToolCallRecord("r1", "call-1", "add", ToolCallStatus.CLAIMED, 7)
LEASE_HELD = "lease_owner = :me AND epoch = :epoch"
RUNNABLE = "#status IN (:queued, :running, :suspended)"


def _only(request: dict[str, Any]) -> dict[str, Any]:
    """The body of a one-operation transact item, or a plain request as is."""
    for kind in ("Put", "Update", "ConditionCheck"):
        if kind in request:
            body: dict[str, Any] = request[kind]
            return body
    return request


FENCES: list[tuple[str, dict[str, Any], dict[str, Any], str, dict[str, Any]]] = [
    (
        "renew: only the lease holder at its epoch, and only while its lease is live",
        renew_update("tbl", "r1", worker="w1", epoch=7, now=10.0, lease_seconds=30.0),
        codec.run_key("r1"),
        f"{LEASE_HELD} AND lease_until > :now",
        {":me": {"S": "w1"}, ":epoch": {"N": "7"}, ":now": {"N": "10.000000"}},
    ),
    (
        "release: only the holder, and only while the run has not ended",
        release_update(
            "tbl",
            "r1",
            worker="w1",
            epoch=7,
            now=10.0,
            status=RunStatus.SUSPENDED,
            idle_suspensions=1,
        ),
        codec.run_key("r1"),
        f"{LEASE_HELD} AND {RUNNABLE}",
        {":me": {"S": "w1"}, ":epoch": {"N": "7"}},
    ),
    (
        "finish: only the holder, and only while the run has not ended",
        finish_update(
            "tbl", "r1", worker="w1", epoch=7, now=10.0, status=RunStatus.FAILED, error=ERROR
        ),
        codec.run_key("r1"),
        f"{LEASE_HELD} AND {RUNNABLE}",
        {":me": {"S": "w1"}, ":epoch": {"N": "7"}},
    ),
    (
        "drop lease of an ended run: only the holder",
        drop_lease_update("tbl", "r1", worker="w1", epoch=7, now=10.0),
        codec.run_key("r1"),
        LEASE_HELD,
        {":me": {"S": "w1"}, ":epoch": {"N": "7"}},
    ),
    (
        "cancel: only a run that has not ended",
        cancel_update("tbl", "r1", now=10.0),
        codec.run_key("r1"),
        RUNNABLE,
        {":cancelled": {"S": "cancelled"}},
    ),
    (
        "rescue: the run exactly as the sweeper read it, due, and nobody holding it",
        rescue_update("tbl", SWEPT, rescues=3, fruitless=1, now=500.0, next_in=120.0),
        codec.run_key("r1"),
        "epoch = :epoch AND rescues = :rescues AND sweep_at <= :now AND "
        f"{RUNNABLE} AND (attribute_not_exists(lease_owner) OR lease_until <= :now)",
        {":epoch": {"N": "7"}, ":rescues": {"N": "2"}, ":now": {"N": "500.000000"}},
    ),
    (
        "abandon: the same as a rescue",
        abandon_update("tbl", SWEPT, error=ERROR, now=500.0),
        codec.run_key("r1"),
        "epoch = :epoch AND rescues = :rescues AND sweep_at <= :now AND "
        f"{RUNNABLE} AND (attribute_not_exists(lease_owner) OR lease_until <= :now)",
        {":epoch": {"N": "7"}, ":rescues": {"N": "2"}},
    ),
    (
        "a new thread: its id free",
        create_thread_put("tbl", Thread("t1", "o")),
        codec.thread_key("t1"),
        "attribute_not_exists(pk)",
        {},
    ),
    (
        "the lease check of a tool-call claim: the run still at the claimer's epoch",
        lease_check("tbl", "r1", 7),
        codec.run_key("r1"),
        "epoch = :epoch",
        {":epoch": {"N": "7"}},
    ),
    (
        "a tool-call claim: the call not claimed yet",
        tool_claim_transaction("tbl", RECORD)[OPERATION],
        codec.tool_key("r1", "call-1"),
        "attribute_not_exists(pk)",
        {},
    ),
    (
        "a tool-call takeover: still claimed, by the epoch that was seen dead",
        tool_reclaim_transaction("tbl", "r1", "call-1", epoch=8, previous_epoch=7)[OPERATION],
        codec.tool_key("r1", "call-1"),
        "#status = :claimed AND epoch = :prev",
        {":claimed": {"S": "claimed"}, ":prev": {"N": "7"}, ":mine": {"N": "8"}},
    ),
    (
        "a tool-call result: still claimed, by this epoch",
        tool_finish_update("tbl", "r1", "call-1", epoch=8, content="3", is_error=False),
        codec.tool_key("r1", "call-1"),
        "#status = :claimed AND epoch = :epoch",
        {":claimed": {"S": "claimed"}, ":epoch": {"N": "8"}},
    ),
]


@pytest.mark.parametrize(
    ("request_", "key", "condition", "values"),
    [pytest.param(*row[1:], id=row[0]) for row in FENCES],
)
def test_each_write_is_conditioned_on_what_its_writer_holds(
    request_: dict[str, Any], key: dict[str, Any], condition: str, values: dict[str, Any]
) -> None:
    body = _only(request_)
    target = body["Key"] if "Key" in body else {k: body["Item"][k] for k in ("pk", "sk")}
    assert target == key
    assert body["ConditionExpression"] == condition
    sent = body.get("ExpressionAttributeValues", {})
    assert {name: sent.get(name) for name in values} == values


def test_tool_claims_are_checked_against_the_run_epoch_in_the_same_transaction() -> None:
    claim = tool_claim_transaction("tbl", RECORD)
    assert [next(iter(item)) for item in claim] == ["ConditionCheck", "Put"]
    assert claim[LEASE_CHECK] == lease_check("tbl", "r1", 7)
    # A lost claim returns the stored call: who holds it, and whether it finished.
    assert claim[OPERATION]["Put"]["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    assert claim[OPERATION]["Put"]["Item"]["epoch"] == {"N": "7"}
    takeover = tool_reclaim_transaction("tbl", "r1", "call-1", epoch=8, previous_epoch=7)
    # The takeover is fenced by the taker's epoch, not the dead claimer's.
    assert takeover[LEASE_CHECK] == lease_check("tbl", "r1", 8)


@pytest.mark.parametrize(
    ("previous_active", "active_clause", "previous_value"),
    [(None, "attribute_not_exists(active_run)", None), ("r0", "active_run = :previous", "r0")],
)
def test_create_run_pins_the_thread_as_read(
    previous_active: str | None, active_clause: str, previous_value: str | None
) -> None:
    run = dataclasses.replace(BASE, status=RunStatus.QUEUED, lease=Lease(), message_count=7)
    commit = TurnCommit(base=BASE, messages=(Message.user("a"), Message.user("b")))
    transact = create_run_transaction(
        "tbl", run, items_for(commit), old_count=5, previous_active=previous_active
    )
    run_put, *message_puts, thread = transact
    # The run id must be free: a taken one is the first cancellation reason (RunExists).
    assert run_put["Put"]["Item"]["pk"] == {"S": "RUN#r1"}
    assert run_put["Put"]["ConditionExpression"] == "attribute_not_exists(pk)"
    assert [p["Put"]["ConditionExpression"] for p in message_puts] == [
        "attribute_not_exists(pk)"
    ] * 2
    update = thread["Update"]
    assert update["Key"] == codec.thread_key("t1")
    assert update["ConditionExpression"] == (
        f"message_count = :old AND #owner = :owner AND {active_clause}"
    )
    values = update["ExpressionAttributeValues"]
    assert (values[":old"], values[":new"], values[":owner"], values[":run"]) == (
        {"N": "5"},
        {"N": "7"},
        {"S": BASE.owner},
        {"S": "r1"},
    )
    assert values.get(":previous") == (None if previous_value is None else {"S": "r0"})


def _requests() -> list[dict[str, Any]]:
    commit = TurnCommit(
        base=BASE,
        messages=(Message.assistant("a"),),
        final_status=RunStatus.FAILED,
        error=ERROR,
        stop_reason="refusal",
    )
    bodies = [_only(row[1]) for row in FENCES]
    bodies += [
        _only(item) for item in commit_transaction("tbl", commit, items_for(commit), now=1.0)
    ]
    bodies += [_only(item) for item in tool_claim_transaction("tbl", RECORD)]
    bodies += [
        _only(item)
        for item in create_run_transaction("tbl", BASE, [], old_count=5, previous_active="r0")
    ]
    bodies += [
        claim_update("tbl", "r1", worker="w", now=1.0, lease_seconds=2.0),
        messages_query("tbl", "t1"),
        stalled_query("tbl", "0", now=1.0, limit=10),
    ]
    return bodies


@pytest.mark.parametrize("body", _requests())
def test_every_placeholder_is_defined_and_every_definition_used(body: dict[str, Any]) -> None:
    # DynamoDB rejects both an undefined placeholder and an unused definition.
    text = " ".join(
        body[name]
        for name in ("ConditionExpression", "UpdateExpression", "KeyConditionExpression")
        if name in body
    )
    assert set(re.findall(r":\w+", text)) == set(body.get("ExpressionAttributeValues", {}))
    assert set(re.findall(r"#\w+", text)) == set(body.get("ExpressionAttributeNames", {}))
