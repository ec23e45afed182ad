"""The local SQS event source against a moto server, with the handlers of tests/local/handlers.py
running in real container processes."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from awaken_s3.local.event_source import EventSourceThread, SqsEventSource
from awaken_s3.local.invocations import InvocationResult
from tests.fixtures.processes import process_gone
from tests.local.conftest import (
    HUNG,
    HandlerLog,
    Sqs,
    eventually,
    eventually_sync,
    function,
)


def outcomes(source: SqsEventSource) -> list[str]:
    return [r.outcome for r in source.results()]


def served(source: SqsEventSource, record_id: str) -> list[InvocationResult]:
    """The invocations whose batch held the record with body id ``record_id``."""
    return [r for r in source.results() if any(json.loads(b)["id"] == record_id for b in r.bodies)]


async def test_batches_arrive_as_lambda_events_with_a_live_context(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    url, _ = sqs.queue(visibility=30)
    sent = {sqs.send(url, {"id": f"m{i}"}): f"m{i}" for i in range(5)}
    source = SqsEventSource(
        url,
        function(handler_log, sqs, url, timeout=7),
        batch_size=3,
        max_concurrency=1,
        endpoint_url=sqs.endpoint_url,
    )
    async with source:
        await eventually(
            lambda: len({m for r in source.results() for m in r.deleted}) == 5,
            what="all five messages deleted",
        )
    assert sqs.counts(url) == (0, 0)
    starts = handler_log.lines("start")
    assert len(starts) == len(source.results()) >= 2  # five messages, at most three a batch
    records = [record for start in starts for record in start["event"]["Records"]]
    assert sorted(r["messageId"] for r in records) == sorted(sent)
    queue_name = url.rsplit("/", 1)[-1]
    for record in records:
        assert record["eventSource"] == "aws:sqs"
        assert record["eventSourceARN"] == f"arn:aws:sqs:us-east-1:123456789012:{queue_name}"
        assert record["awsRegion"] == "us-east-1"
        assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest()
        assert json.loads(record["body"])["id"] == sent[record["messageId"]]
        assert record["messageAttributes"] == {}
        assert record["attributes"]["ApproximateReceiveCount"] == "1"
        assert set(record["attributes"]) == {
            "ApproximateReceiveCount",
            "SentTimestamp",
            "SenderId",
            "ApproximateFirstReceiveTimestamp",
        }
    # The context: Lambda's names, a fresh request id per invocation, a real deadline.
    request_ids = [s["request_id"] for s in starts]
    assert len(set(request_ids)) == len(request_ids)
    assert {r.request_id for r in source.results()} == set(request_ids)
    later = {e["request_id"]: e["remaining_ms"] for e in handler_log.lines("remaining")}
    for start in starts:
        assert start["function_name"] == "emulated"
        assert start["function_version"] == "$LATEST"
        assert start["memory_limit_in_mb"] == "256"
        assert start["invoked_function_arn"] == (
            "arn:aws:lambda:us-east-1:123456789012:function:emulated"
        )
        assert start["log_group_name"] == "/aws/lambda/emulated"
        assert start["log_stream_name"] == start["env_log_stream"]
        assert 0 < start["remaining_ms"] <= 7000
        assert later[start["request_id"]] < start["remaining_ms"]
    # One container served every batch (max_concurrency 1): one cold start, one log stream.
    assert len({s["pid"] for s in starts}) == 1
    assert len({s["log_stream_name"] for s in starts}) == 1
    assert [r.cold_start for r in source.results()] == [True] + [False] * (len(starts) - 1)
    assert all(r.outcome == "ok" and r.retried == () for r in source.results())


async def test_a_partial_batch_response_deletes_only_the_successes(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    url, _ = sqs.queue(visibility=1)
    for body in ({"id": "a"}, {"id": "b", "do": "fail_first"}, {"id": "c"}):
        sqs.send(url, body)
    source = SqsEventSource(
        url,
        function(handler_log, sqs, url),
        batch_size=3,
        max_concurrency=1,
        endpoint_url=sqs.endpoint_url,
    )
    async with source:
        await eventually(lambda: len(served(source, "b")) == 2, what="b delivered again")
    first = source.results()[0]
    assert [json.loads(b)["id"] for b in first.bodies] == ["a", "b", "c"]
    b_id = first.message_ids[1]
    assert first.outcome == "ok"
    assert first.response == {"batchItemFailures": [{"itemIdentifier": b_id}]}
    assert first.deleted == (first.message_ids[0], first.message_ids[2])
    assert first.retried == (b_id,)
    again = served(source, "b")[1]
    assert again.message_ids == (b_id,)
    assert again.records[0].receive_count == 2
    assert again.deleted == (b_id,)
    # a and c were deleted: never delivered twice.
    assert [len(served(source, i)) for i in ("a", "c")] == [1, 1]
    assert sqs.counts(url) == (0, 0)


async def test_an_invalid_batch_response_fails_the_whole_batch(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    url, _ = sqs.queue(visibility=1)
    sqs.send(url, {"id": "good"})
    sqs.send(url, {"id": "bad", "response": {"batchItemFailures": [{"itemIdentifier": "nope"}]}})
    source = SqsEventSource(
        url,
        function(handler_log, sqs, url),
        batch_size=2,
        max_concurrency=1,
        endpoint_url=sqs.endpoint_url,
    )
    async with source:
        await eventually(lambda: len(served(source, "bad")) == 2, what="the batch again")
    first = source.results()[0]
    assert len(first.records) == 2
    assert first.outcome == "ok"
    assert first.deleted == ()
    assert first.retried == first.message_ids
    assert first.error is not None and "'nope' is not in the batch" in first.error
    assert served(source, "good")[1].records[0].receive_count == 2


async def test_a_handler_that_cannot_be_imported_fails_and_deletes_nothing(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    url, _ = sqs.queue(visibility=30)
    message_id = sqs.send(url, {"id": "m"})
    config = function(handler_log, sqs, url, handler="tests.local.handlers:no_such_handler")
    async with SqsEventSource(url, config, endpoint_url=sqs.endpoint_url) as source:
        await eventually(lambda: bool(source.results()), what="an invocation")
    result = source.results()[0]
    assert result.outcome == "error"
    assert result.pid is None
    assert result.error is not None and "no_such_handler" in result.error
    assert result.retried == (message_id,)
    assert sqs.counts(url) == (0, 1)  # in flight until its visibility timeout runs out


@pytest.mark.slow
async def test_an_exception_an_exit_a_kill_and_a_timeout_delete_nothing_and_records_come_back(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    url, _ = sqs.queue(visibility=4)  # longer than the timeout: no redelivery while running
    sqs.send(url, {"id": "raise", "do": "raise_first"})
    sqs.send(url, {"id": "exit", "do": "exit_first"})
    sqs.send(url, {"id": "slow", "do": "sleep_first", "seconds": 60})
    sqs.send(url, {"id": "suicide", "do": "sigkill_first"})
    source = SqsEventSource(
        url,
        function(handler_log, sqs, url, timeout=2.5),
        max_concurrency=4,
        endpoint_url=sqs.endpoint_url,
    )
    async with source:
        await eventually(
            lambda: all(len(served(source, i)) == 2 for i in ("raise", "exit", "slow", "suicide")),
            what="every record delivered twice",
        )
    for record_id, outcome, error in (
        ("raise", "error", "RuntimeError: record raise raised"),
        ("exit", "error", "Runtime.ExitError: exited with status 3"),
        ("slow", "timeout", "Sandbox.Timedout"),
        ("suicide", "killed", "SIGKILLed"),
    ):
        first, second = served(source, record_id)
        assert (first.outcome, first.deleted, first.retried) == (outcome, (), first.message_ids)
        assert first.error is not None and error in first.error
        assert second.message_ids == first.message_ids
        assert second.records[0].receive_count == 2
        assert (second.outcome, second.deleted) == ("ok", second.message_ids)
        # Back only when the queue's visibility timeout (4 s from the receive) ran out.
        received_ms = int(
            first.records[0].event_record["attributes"]["ApproximateFirstReceiveTimestamp"]
        )
        assert second.started_at - received_ms / 1000 >= 4.0
    timed_out, after = served(source, "slow")
    assert timed_out.pid is not None and process_gone(timed_out.pid)
    # Served elsewhere: a new container, or one another record left idle by then (which of
    # the two depends on the order the records come back in, not on the event source).
    assert after.pid != timed_out.pid
    # The timed-out handler saw its real deadline.
    [start] = [s for s in handler_log.lines("start") if s["request_id"] == timed_out.request_id]
    assert 0 < start["remaining_ms"] <= 2500
    assert sqs.counts(url) == (0, 0)


@pytest.mark.slow
def test_a_sigkilled_busy_container_s_records_come_back_to_a_new_container(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    url, _ = sqs.queue(visibility=2)
    message_id = sqs.send(url, {"id": "victim", "do": "block_first"})
    source = SqsEventSource(url, function(handler_log, sqs, url), endpoint_url=sqs.endpoint_url)
    with EventSourceThread(source):
        eventually_sync(lambda: bool(source.busy()), what="a busy container")
        [worker] = source.busy()
        assert worker.message_ids == (message_id,)
        assert json.loads(worker.bodies[0])["id"] == "victim"
        assert worker.started_at < worker.deadline_at
        eventually_sync(lambda: bool(handler_log.records("victim")), what="the handler at work")
        assert source.kill_busy(lambda w: message_id in w.message_ids) == [worker.pid]
        eventually_sync(lambda: len(source.results()) == 2, what="the record served again")
    killed, again = source.results()
    assert (killed.outcome, killed.pid, killed.deleted) == ("killed", worker.pid, ())
    assert killed.retried == (message_id,)
    assert again.pid != worker.pid and again.cold_start
    assert again.records[0].receive_count == 2
    assert (again.outcome, again.deleted) == ("ok", (message_id,))
    assert process_gone(worker.pid)
    assert source.kill(worker.pid) is False  # not one of its containers any more


@pytest.mark.slow
async def test_fifo_groups_keep_their_order_and_never_run_two_batches_at_once(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    url, _ = sqs.queue(fifo=True, visibility=1)
    # a0 outlives its visibility timeout: SQS hands a0 (and a1 behind it) out again while
    # a0's invocation still runs; the event source must hold them until it ends.
    sqs.send(url, {"id": "a0", "do": "sleep_first", "seconds": 2.5}, group="A")
    for i in (1, 2):
        sqs.send(url, {"id": f"a{i}"}, group="A")
    for i in (0, 1, 2):
        sqs.send(url, {"id": f"b{i}"}, group="B")
    source = SqsEventSource(
        url,
        function(handler_log, sqs, url),
        batch_size=2,
        max_concurrency=3,
        endpoint_url=sqs.endpoint_url,
    )
    async with source:
        assert source.fifo
        await eventually(
            lambda: len({m for r in source.results() for m in r.deleted}) == 6,
            what="all six messages deleted",
        )
    entries = sorted(handler_log.records(), key=lambda e: e["at"])
    # Never two containers in one group at once (each holds the group's lock while working).
    assert all(e["exclusive"] for e in entries)
    for group in ("A", "B"):
        seen = [int(e["id"][1:]) for e in entries if e["group"] == group]
        # Each record's first processing comes in order. Later ones may repeat: a0's batch
        # acknowledged a0 and a1 after their visibility ran out, and SQS refuses an expired
        # receipt handle on a FIFO queue, so those records come back (at least once).
        first = list(dict.fromkeys(seen))
        assert first == sorted(first), seen
        assert set(seen) == {0, 1, 2}
    # SQS handed group A out again while a0's invocation still ran (the case the event source
    # holds records for). moto hands out a1 and a2 then, skipping a0 (see docs/LOCAL.md).
    assert max(e["receive_count"] for e in entries if e["group"] == "A") >= 2
    assert sqs.counts(url) == (0, 0)


@pytest.mark.slow
async def test_provisioned_containers_are_ready_ahead_of_records_and_replaced_when_one_dies(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    url, _ = sqs.queue(visibility=30)
    source = SqsEventSource(
        url,
        function(handler_log, sqs, url),
        max_concurrency=1,
        provisioned=2,  # one spare beyond the concurrency
        endpoint_url=sqs.endpoint_url,
    )
    async with source:
        await eventually(
            lambda: len(source.containers()) == 2 and not any(c.busy for c in source.containers()),
            what="two initialized containers",
        )
        first = {c.pid for c in source.containers()}
        assert all(c.invocations == 0 for c in source.containers())
        sqs.send(url, {"id": "m"})
        await eventually(lambda: bool(source.results()), what="the record served")
        assert not source.results()[0].cold_start
        victim = next(iter(first))
        assert source.kill(victim)
        await eventually(
            lambda: (
                len(source.containers()) == 2 and victim not in {c.pid for c in source.containers()}
            ),
            what="the dead container replaced",
        )


@pytest.mark.slow
async def test_a_zombie_s_late_acknowledgement_leaves_the_record_its_successor_holds(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    # The first invocation outlives the record's visibility: SQS hands the record to a second
    # invocation, which holds it. The first one then succeeds and the event source deletes
    # with the first receipt handle: SQS answers success and deletes nothing (moto alone
    # would delete the record under its new holder).
    url, _ = sqs.queue(visibility=1)
    message_id = sqs.send(url, {"id": "r", "do": "zombie", "first": 2.5, "then": 4})
    source = SqsEventSource(
        url, function(handler_log, sqs, url), max_concurrency=2, endpoint_url=sqs.endpoint_url
    )
    async with source:
        await eventually(lambda: len(source.results()) >= 1, what="the zombie's invocation")
        zombie = source.results()[0]
        assert zombie.records[0].receive_count == 1 and zombie.deleted == (message_id,)
        # Its successor still works on the record, and the record is still there.
        assert [w.records[0].receive_count for w in source.busy()] == [2]
        assert sqs.counts(url) == (0, 1)
        await eventually(lambda: len(source.results()) >= 2, what="the successor's invocation")
    successor = source.results()[1]
    assert successor.records[0].receive_count == 2 and successor.deleted == (message_id,)
    assert sqs.counts(url) == (0, 0)


@pytest.mark.slow
async def test_a_message_received_more_than_max_receive_count_times_goes_to_the_dlq(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    url, dlq = sqs.queue(visibility=1, max_receive_count=2)
    assert dlq is not None
    message_id = sqs.send(url, {"id": "poison", "do": "fail"})
    async with SqsEventSource(
        url, function(handler_log, sqs, url), endpoint_url=sqs.endpoint_url
    ) as source:
        await eventually(lambda: sqs.counts(dlq) == (1, 0), what="the message in the DLQ")
    assert [e["receive_count"] for e in handler_log.records("poison")] == [1, 2]
    assert [r.retried for r in source.results()] == [(message_id,), (message_id,)]
    assert sqs.counts(url) == (0, 0)
    [moved] = sqs.client.receive_message(QueueUrl=dlq)["Messages"]
    assert moved["MessageId"] == message_id


@pytest.mark.slow
async def test_the_handler_s_own_change_message_visibility_decides_when_a_record_comes_back(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    # The queue would hide a failed record for 12 hours; the handler asks for 2 seconds.
    url, _ = sqs.queue(visibility=43_200)
    message_id = sqs.send(url, {"id": "soon", "do": "visibility_first", "seconds": 2})
    async with SqsEventSource(
        url, function(handler_log, sqs, url), endpoint_url=sqs.endpoint_url
    ) as source:
        await eventually(lambda: len(source.results()) == 2, what="the record back")
    first, second = source.results()
    assert first.retried == (message_id,)
    assert second.records[0].receive_count == 2
    assert second.deleted == (message_id,)
    # Not sooner either: the event source did not release the failed record itself.
    assert second.started_at - first.started_at >= 2.0


@pytest.mark.slow
async def test_stop_kills_every_container_and_its_children(
    sqs: Sqs, handler_log: HandlerLog, tmp_path: Path
) -> None:
    url, _ = sqs.queue(visibility=30)
    sqs.send(url, {"id": "spawner", "do": "spawn_and_block"})
    sqs.send(url, {"id": "blocker", "do": "block"})
    sqs.send(url, {"id": "quick"})
    source = SqsEventSource(
        url,
        function(handler_log, sqs, url),
        max_concurrency=3,
        endpoint_url=sqs.endpoint_url,
        log_dir=tmp_path / "logs",
    )
    await source.start()
    try:
        await eventually(
            lambda: len(source.busy()) == 2 and len(source.results()) == 1,
            what="two busy containers and one idle",
        )
        await eventually(lambda: bool(handler_log.lines("spawned")), what="the grandchild")
        pids = [c.pid for c in source.containers()]
        assert len(pids) == 3
        assert sorted(c.busy for c in source.containers()) == [False, True, True]
        [spawned] = handler_log.lines("spawned")
    finally:
        await source.stop(grace=0.1)
    everyone = [*pids, int(spawned["child"])]
    await eventually(lambda: all(process_gone(p) for p in everyone), what="every pid gone")
    assert source.busy() == [] and source.containers() == []
    assert sorted(r.outcome for r in source.results()) == ["killed", "killed", "ok"]
    # Each container's output went to its own log file.
    logs = list((tmp_path / "logs").iterdir())
    assert len(logs) == 3
    assert any("a stray print" in log.read_text() for log in logs)


@pytest.mark.slow
async def test_leaving_on_an_exception_kills_busy_containers_without_waiting(
    sqs: Sqs, handler_log: HandlerLog
) -> None:
    url, _ = sqs.queue(visibility=30)
    sqs.send(url, {"id": "blocker", "do": "block"})
    source = SqsEventSource(
        url, function(handler_log, sqs, url), endpoint_url=sqs.endpoint_url, stop_grace=3600
    )

    async def crash_while_busy() -> None:
        async with source:
            await eventually(lambda: bool(source.busy()), what="a busy container")
            raise RuntimeError("the test harness failed")

    # Were the hour of grace honoured, this would only end at the bound.
    with pytest.raises(RuntimeError, match="harness failed"):
        await asyncio.wait_for(crash_while_busy(), HUNG)
    [result] = source.results()
    assert result.outcome == "killed"
    assert result.pid is not None and process_gone(result.pid)
