"""Recovery paths through the real worker handler in local containers, fed by the SQS event
source on moto (with SQS's receipt-handle rules): S3 unreachable while runs complete, a worker
that dies between receiving its record and claiming the run, a record that runs out of
receives and is dead-lettered (docs/THREADS.md, "Recovery paths").

Every wait is for an explicit event (a stored state, a file, a process's end); the bounds
only fail a hung test, except where a test shows a record came back long before the queue's
own visibility timeout (a margin of tens of seconds, not a measurement).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from awaken_s3.demo.model import ANSWER
from awaken_s3.local.containers import FunctionConfig
from awaken_s3.local.event_source import EventSourceThread, SqsEventSource
from awaken_s3.service import sweeper_job
from awaken_s3.service.wiring import warm_runtime
from awaken_s3.stores.s3_protocol import object_key
from awaken_s3.threads import RunState
from handlers import api
from tests.fixtures.tcp_switch import TcpSwitch
from tests.local.conftest import Sqs, eventually_sync, provision
from tests.service.conftest import FakeContext, http_event, stored

pytestmark = pytest.mark.slow

LEASE = 2.0
MARGIN = 1.0


@dataclass
class Stack:
    sqs: Sqs
    bucket: str
    table: str
    queue_url: str
    dlq_url: str
    env: dict[str, str]
    files: Path

    @property
    def release(self) -> Path:
        return self.files / "release"

    @property
    def kill_at_claim(self) -> Path:
        return self.files / "kill-at-claim"

    @property
    def calls(self) -> Path:
        return self.files / "calls.jsonl"

    def source(self, *, concurrency: int = 1, env: dict[str, str] | None = None) -> SqsEventSource:
        config = FunctionConfig(
            "tests.local.recovery_worker:lambda_handler",
            timeout=60,
            env={**self.env, **(env or {})},
        )
        return SqsEventSource(
            self.queue_url,
            config,
            max_concurrency=concurrency,
            endpoint_url=self.sqs.endpoint_url,
            poll_interval=0.1,
            log_dir=self.files / "logs",
        )

    def start_run(self, run_id: str) -> None:
        thread = call_api("POST", "/threads")
        call_api(
            "POST",
            f"/threads/{thread['thread_id']}/runs",
            body={"message": "What is a stream checkpoint?", "run_id": run_id},
        )

    def run(self, run_id: str) -> RunState:
        async def read() -> RunState:
            from awaken_s3.service.wiring import open_services
            from awaken_s3.settings import StorageSettings

            async with open_services(StorageSettings.from_env(need_queue=True)) as services:
                return await services.threads.get_run(stored(run_id))

        return asyncio.run(read())

    def checkpoint(self, run_id: str) -> dict[str, Any] | None:
        s3 = boto3.client("s3", endpoint_url=self.sqs.endpoint_url)
        try:
            body = s3.get_object(Bucket=self.bucket, Key=object_key("checkpoints/", stored(run_id)))
        except s3.exceptions.NoSuchKey:
            return None
        loaded: dict[str, Any] = json.loads(body["Body"].read())
        return loaded

    def wait_for_half(self, run_id: str) -> None:
        """Until the run's checkpoint holds the first half of the answer (where the test
        worker's model waits for the release file)."""

        def half() -> bool:
            saved = self.checkpoint(run_id)
            return saved is not None and len(saved["partial_text"]) >= len(ANSWER) // 2

        eventually_sync(half, what=f"the first half of {run_id} checkpointed")

    def leftovers(self) -> list[dict[str, Any]]:
        s3 = boto3.client("s3", endpoint_url=self.sqs.endpoint_url)
        listed: dict[str, Any] = dict(s3.list_objects_v2(Bucket=self.bucket, Prefix="checkpoints/"))
        return list(listed.get("Contents", []))

    def committed_text(self, run_id: str) -> str:
        thread_id = call_api("GET", f"/runs/{run_id}")["thread_id"]
        messages = call_api("GET", f"/threads/{thread_id}")["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"], messages
        return "".join(b.get("text", "") for b in messages[1]["content"])

    def sweep(self) -> dict[str, Any]:
        """One pass of the deployed sweeper's handler."""
        summary: dict[str, Any] = sweeper_job.lambda_handler({}, FakeContext().lambda_context)
        return summary


def call_api(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    response = api.lambda_handler(http_event(method, path, **kwargs), FakeContext().lambda_context)
    assert int(response["statusCode"]) < 300, response
    body: dict[str, Any] = json.loads(response["body"])
    return body


@pytest.fixture
def stack(sqs: Sqs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stack]:
    suffix = uuid.uuid4().hex[:10]
    bucket = table = f"awaken-{suffix}"
    queue_url, dlq_url = sqs.queue(fifo=True, visibility=60, max_receive_count=5)
    assert dlq_url is not None
    env = {
        "AWS_ENDPOINT_URL": sqs.endpoint_url,
        "AWAKEN_BUCKET": bucket,
        "AWAKEN_TABLE": table,
        "AWAKEN_QUEUE_URL": queue_url,
        "AWAKEN_PROVIDER": "anthropic",
        "AWAKEN_MODEL": "scripted-1",
        "AWAKEN_LEASE_SECONDS": str(LEASE),
        "AWAKEN_VISIBILITY_MARGIN_SECONDS": str(MARGIN),
        "AWAKEN_DEADLINE_MARGIN_SECONDS": "1",
        "POWERTOOLS_SERVICE_NAME": "awaken-test",
        "POWERTOOLS_METRICS_NAMESPACE": "awaken-test",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "RECOVERY_RELEASE": str(tmp_path / "release"),
        "RECOVERY_KILL_AT_CLAIM": str(tmp_path / "kill-at-claim"),
        "RECOVERY_CALLS": str(tmp_path / "calls.jsonl"),
    }
    provision(sqs, monkeypatch, env)
    warm_runtime().reset()  # this process's API and sweeper handlers: clients for this stack
    yield Stack(sqs, bucket, table, queue_url, dlq_url, env, tmp_path)
    warm_runtime().reset()


def test_an_s3_outage_leaves_no_finished_run_in_the_dead_letter_queue(stack: Stack) -> None:
    # Runs stream and checkpoint; then S3 becomes unreachable (its endpoint refuses every
    # connection) and the runs complete: their commits are in DynamoDB, but nobody can read
    # or delete their checkpoints. Their records are acknowledged anyway (a leftover is
    # stale, and the sweeper's), so nothing walks into the DLQ; once S3 is back, the sweeper
    # deletes every leftover.
    runs = ["run-1", "run-2", "run-3"]
    moto_port = int(stack.sqs.endpoint_url.rsplit(":", 1)[1])
    with TcpSwitch(moto_port) as s3:
        workers = stack.source(
            concurrency=len(runs),
            # Only S3 goes through the switch; few retries, so a refused call fails fast.
            env={"AWS_ENDPOINT_URL_S3": s3.url, "AWS_MAX_ATTEMPTS": "2"},
        )
        with EventSourceThread(workers):
            for run_id in runs:
                stack.start_run(run_id)
            for run_id in runs:
                stack.wait_for_half(run_id)
            s3.down()
            stack.release.touch()
            eventually_sync(
                lambda: all(stack.run(r).status.value == "completed" for r in runs),
                what="every run completed",
            )
            eventually_sync(
                lambda: stack.sqs.counts(stack.queue_url) == (0, 0) and not workers.busy(),
                what="the queue drained",
            )
        results = workers.results()
        assert {r.outcome for r in results} == {"ok"}
        assert all(r.response == {"batchItemFailures": []} for r in results)
        assert stack.sqs.counts(stack.dlq_url) == (0, 0)
        # The leftovers are still there: nobody could delete them.
        assert all(stack.checkpoint(r) is not None for r in runs)
        for run_id in runs:
            assert stack.committed_text(run_id) == ANSWER

        s3.up()
        # The sweeper judges checkpoints quiet for its grace; wait until they are.
        grace = LEASE / 3 + MARGIN
        newest = max(o["LastModified"].timestamp() for o in stack.leftovers())
        eventually_sync(lambda: time.time() > newest + grace, what="the leftovers quiet")
        summary = stack.sweep()
    assert summary["leftovers_deleted"] == len(runs)
    assert stack.leftovers() == []
    assert stack.sqs.counts(stack.dlq_url) == (0, 0)


def test_a_worker_that_dies_before_its_claim_lets_its_record_back_within_a_lease(
    stack: Stack,
) -> None:
    # The queue hides a received record for 60 s; the handler hides it for lease + margin
    # (3 s) before it claims anything, so a death right at the claim costs about a lease,
    # not the queue's visibility timeout.
    stack.kill_at_claim.touch()
    stack.release.touch()
    workers = stack.source()
    with EventSourceThread(workers):
        stack.start_run("run-1")
        eventually_sync(lambda: len(workers.results()) >= 2, what="the record back", bound=40)
    died, resumed = workers.results()[:2]
    assert (died.outcome, resumed.outcome) == ("killed", "ok")
    assert resumed.records[0].message_id == died.records[0].message_id
    assert resumed.records[0].receive_count == 2
    # Long before the 60 s the queue would have hidden it (about lease + margin: 3 s).
    assert resumed.started_at - died.started_at < 30
    # The dead worker had taken its record's visibility in hand before it reached the claim.
    calls = [json.loads(line) for line in stack.calls.read_text().splitlines()]
    first = [c["op"] for c in calls if c["pid"] == died.pid]
    assert first == ["ChangeMessageVisibilityBatch", "claim"]
    run = stack.run("run-1")
    assert (run.status.value, run.lease.epoch) == ("completed", 1)  # the dead one never claimed
    assert stack.committed_text("run-1") == ANSWER


def test_a_dead_lettered_run_is_rescued_by_the_sweeper_s_next_pass(
    stack: Stack, sqs: Sqs, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A queue that dead-letters a record after one receive: the worker dies holding the run,
    # its record comes back and goes to the DLQ instead of a worker. The run is due for the
    # sweeper at its lease's expiry plus the grace, and the first sweep from then on re-sends
    # it; the next worker resumes the turn from the checkpoint.
    queue_url, dlq_url = sqs.queue(fifo=True, visibility=60, max_receive_count=1)
    assert dlq_url is not None
    stack.queue_url = stack.env["AWAKEN_QUEUE_URL"] = queue_url
    stack.dlq_url = dlq_url
    monkeypatch.setenv("AWAKEN_QUEUE_URL", queue_url)  # the API's and the sweeper's
    workers = stack.source()
    with EventSourceThread(workers):
        stack.start_run("run-1")
        stack.wait_for_half("run-1")
        [holder] = workers.busy()
        killed_at = time.time()
        assert workers.kill(holder.pid)
        eventually_sync(lambda: sqs.counts(dlq_url) == (1, 0), what="the record dead-lettered")
        run = stack.run("run-1")
        assert run.sweep_at is not None and run.status.value == "running"
        grace = LEASE / 3 + MARGIN
        # Due at the dead holder's lease expiry plus the grace: within lease + grace of the kill.
        assert run.sweep_at <= killed_at + LEASE + grace
        due = run.sweep_at
        if time.time() < due:
            assert stack.sweep()["rescued"] == 0  # not before it is due
        eventually_sync(lambda: time.time() > due, what="the run due")
        assert stack.sweep()["rescued"] == 1  # the first pass once it is due
        eventually_sync(
            lambda: stack.run("run-1").status.value == "completed", what="the rescued run done"
        )
    rescued = stack.run("run-1")
    assert rescued.lease.epoch == 2 and rescued.rescues == 1
    assert stack.committed_text("run-1") == ANSWER
    assert stack.checkpoint("run-1") is None
    assert [r.outcome for r in workers.results()] == ["killed", "ok"]


def test_a_holder_frozen_past_its_lease_stops_and_the_run_is_claimed_afresh(
    stack: Stack,
) -> None:
    # The worker holding the run is frozen (SIGSTOP: a GC pause, a host that froze the
    # container) until its lease and its record's visibility have run out, then thawed. Its
    # first renewal is refused (an expired lease is never renewed), so it stops and hands the
    # run over instead of carrying on under a lease the next delivery cannot see lost; the run
    # is claimed at a new epoch and resumed from the checkpoint. (Renewing, it would have
    # waited for a release that never comes until its invocation timed out.)
    workers = stack.source()  # one slot: nobody else can take the record while it is frozen
    with EventSourceThread(workers):
        stack.start_run("run-1")
        stack.wait_for_half("run-1")
        [holder] = workers.busy()
        assert workers.freeze(holder.pid)
        held = stack.run("run-1")
        eventually_sync(
            lambda: time.time() > held.lease.lease_until + MARGIN,
            what="the lease and the record's visibility run out",
        )
        assert workers.freeze(holder.pid, frozen=False)
        eventually_sync(
            lambda: stack.run("run-1").status.value == "completed", what="the run done", bound=40
        )
        eventually_sync(
            lambda: stack.sqs.counts(stack.queue_url) == (0, 0) and not workers.busy(),
            what="the queue drained",
        )
    thawed = workers.results()[0]
    assert thawed.pid == holder.pid
    assert (thawed.outcome, thawed.response) == ("ok", {"batchItemFailures": []})
    assert thawed.duration < 40  # it stopped by itself, long before its 60 s timeout
    run = stack.run("run-1")
    assert run.lease.epoch == held.lease.epoch + 1
    assert stack.committed_text("run-1") == ANSWER
    assert stack.checkpoint("run-1") is None
