"""The conditions that fence a stale worker, as sent to DynamoDB (pure, no AWS)."""

from __future__ import annotations

from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import Usage
from awaken_s3.threads import Lease, RunSettings, RunState, RunStatus, TurnCommit, codec
from awaken_s3.threads.expressions import claim_update, commit_transaction

BASE = RunState(
    run_id="r1",
    thread_id="t1",
    owner="o",
    settings=RunSettings(model="m"),
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
