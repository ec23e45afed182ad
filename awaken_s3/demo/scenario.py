"""``awaken-s3 demo``: a worker is SIGKILLed mid-stream; its run resumes in a new one.

Everything runs on an embedded default: an in-process moto server on 127.0.0.1 stands in for
S3, DynamoDB and SQS, and a scripted model streams a known answer. The run is queued as the
API queues it, and the real SQS worker handler drives it inside worker processes started by
the local SQS event-source emulator (Lambda's trigger, as in docs/LOCAL.md). The demo SIGKILLs
the worker mid-stream; nothing else happens: the worker's queue record comes back a little
after its lease runs out (the worker kept its visibility in step with the lease), a fresh
worker process takes the run over, resumes the turn from its S3 checkpoint and commits it.
The demo exits non-zero when the thread is not exactly the whole turn, committed once, with
the checkpoint gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aioboto3
from moto.server import ThreadedMotoServer

from awaken_s3.demo.model import ANSWER
from awaken_s3.demo.settings import BUCKET, CHECKPOINT_PREFIX, LEASE_SECONDS, QUEUE, TABLE
from awaken_s3.dev.resources import visibility_timeout
from awaken_s3.local.event_source import FunctionConfig, SqsEventSource
from awaken_s3.local.ports import free_port
from awaken_s3.messages import Message
from awaken_s3.service.queue import RunMessage, send_run_message
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.threads.dynamo import DynamoThreadStore, create_table, dynamodb_client_config
from awaken_s3.threads.models import RunSettings, RunState, RunStatus

THREAD_ID = "demo-thread"
RUN_ID = "demo-run"
QUESTION = "How does awaken-s3 keep a streaming turn alive when its process dies?"
#: kill the first worker once this share of the answer is checkpointed
KILL_AT = 0.4
WORKER_TIMEOUT = 60.0
#: the demo's own bound on the whole story (a hung demo fails instead of hanging)
STORY_TIMEOUT = 90.0
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "demo",
    "AWS_SECRET_ACCESS_KEY": "demo",
    "AWS_DEFAULT_REGION": "us-east-1",
}

Print = Callable[[str], None]


@dataclass(frozen=True)
class Observed:
    messages: Sequence[Message]
    run: RunState
    checkpoint_left: bool
    plans: Sequence[str | None]
    killed_at_chars: int


def check(observed: Observed) -> list[str]:
    """Everything that is wrong with the resumed run (empty when it is right)."""
    problems: list[str] = []
    roles = [m.role for m in observed.messages]
    if roles != ["user", "assistant"]:
        problems.append(f"expected one user and one assistant message, found {roles}")
    elif observed.messages[1].text != ANSWER:
        got = observed.messages[1].text
        problems.append(
            f"the committed turn is not the whole answer ({len(got)} of {len(ANSWER)} chars)"
        )
    if observed.run.status is not RunStatus.COMPLETED:
        problems.append(f"run status is {observed.run.status.value}, not completed")
    if observed.run.turn != 1:
        problems.append(f"run advanced {observed.run.turn} turns, not 1")
    if observed.checkpoint_left:
        problems.append("the checkpoint was not deleted after the commit")
    if list(observed.plans) != ["R1"]:
        problems.append(f"the resumed turn used plans {list(observed.plans)}, not ['R1']")
    if not 0 < observed.killed_at_chars < len(ANSWER):
        problems.append("the first worker was not killed mid-stream")
    return problems


class _Aws:
    """The demo's view of the embedded fake AWS (never real AWS: fixed fake credentials)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.session = aioboto3.Session(
            aws_access_key_id="demo", aws_secret_access_key="demo", region_name="us-east-1"
        )

    @contextlib.asynccontextmanager
    async def clients(self) -> AsyncIterator[tuple[Any, Any, Any]]:
        s, url = self.session, self.endpoint
        async with (
            s.client("dynamodb", endpoint_url=url, config=dynamodb_client_config()) as db,
            s.client("s3", endpoint_url=url) as s3,
            s.client("sqs", endpoint_url=url) as sqs,
        ):
            yield db, s3, sqs

    def worker_env(self, queue_url: str) -> dict[str, str]:
        return {
            **FAKE_AWS,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWAKEN_BUCKET": BUCKET,
            "AWAKEN_TABLE": TABLE,
            "AWAKEN_QUEUE_URL": queue_url,
            "AWAKEN_CHECKPOINT_PREFIX": CHECKPOINT_PREFIX,
            # Short, so the resumed worker takes over a killed one within seconds.
            "AWAKEN_LEASE_SECONDS": str(LEASE_SECONDS),
            "AWAKEN_VISIBILITY_MARGIN_SECONDS": "1",
            "AWAKEN_DEADLINE_MARGIN_SECONDS": "5",
            "POWERTOOLS_SERVICE_NAME": "awaken-demo",
            "POWERTOOLS_METRICS_NAMESPACE": "awaken-demo",
        }


async def _setup(aws: _Aws) -> str:
    """The bucket, table and queues, and a run queued as the HTTP API queues one."""
    async with aws.clients() as (db, s3, sqs):
        await s3.create_bucket(Bucket=BUCKET)
        await create_table(db, TABLE)
        dlq = await sqs.create_queue(
            QueueName=f"{QUEUE}-dlq.fifo", Attributes={"FifoQueue": "true"}
        )
        dlq_arn = (
            await sqs.get_queue_attributes(QueueUrl=dlq["QueueUrl"], AttributeNames=["QueueArn"])
        )["Attributes"]["QueueArn"]
        queue = await sqs.create_queue(
            QueueName=f"{QUEUE}.fifo",
            Attributes={
                "FifoQueue": "true",
                "ContentBasedDeduplication": "false",
                "VisibilityTimeout": str(visibility_timeout(int(WORKER_TIMEOUT))),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"}
                ),
            },
        )
        queue_url = str(queue["QueueUrl"])
        threads = DynamoThreadStore(TABLE, client=db, s3_client=s3, bucket=BUCKET)
        await threads.create_thread(THREAD_ID, owner="demo-user")
        await threads.create_run(
            RUN_ID,
            thread_id=THREAD_ID,
            owner="demo-user",
            settings=RunSettings(model="demo-model", max_tokens=1024),
            messages=[Message.user(QUESTION)],
        )
        await send_run_message(sqs, queue_url, RunMessage(run_id=RUN_ID))
        return queue_url


async def _kill_mid_stream(aws: _Aws, source: SqsEventSource, say: Print) -> int:
    """SIGKILL the worker once its checkpoint holds KILL_AT of the answer; the chars saved."""
    async with aws.clients() as (_db, s3, _sqs):
        store = S3StreamCheckpointStore(BUCKET, prefix=CHECKPOINT_PREFIX, client=s3)
        deadline = time.monotonic() + WORKER_TIMEOUT
        while time.monotonic() < deadline:
            busy = source.busy()
            stored = await store.get(RUN_ID)
            if busy and stored and len(stored.checkpoint.partial_text) >= KILL_AT * len(ANSWER):
                pid = busy[0].pid
                source.kill(pid)
                # The final word on what survived is the object as it stands now.
                after = await store.get(RUN_ID)
                assert after is not None
                cp = after.checkpoint
                say(
                    f"  SIGKILLed worker A (pid {pid}) mid-stream; its checkpoint survives:\n"
                    f"    s3://{BUCKET}/{CHECKPOINT_PREFIX}{RUN_ID}.json  etag {after.version}\n"
                    f"    turn {cp.turn}, epoch {cp.epoch}, writer {cp.writer[-24:]}, "
                    f"{len(cp.partial_text)} of {len(ANSWER)} chars: "
                    f"...{cp.partial_text[-48:]!r}"
                )
                return len(cp.partial_text)
            if not busy and source.results():
                raise RuntimeError("worker A finished before it could be killed mid-stream")
            await asyncio.sleep(0.05)
    raise RuntimeError("worker A wrote no checkpoint in time")


async def _wait_for_the_end(aws: _Aws, source: SqsEventSource, started: float) -> RunState:
    async with aws.clients() as (db, s3, _sqs):
        threads = DynamoThreadStore(TABLE, client=db, s3_client=s3, bucket=BUCKET)
        while time.monotonic() - started < STORY_TIMEOUT:
            run = await threads.get_run(RUN_ID)
            if run.status.terminal and not source.busy():
                return run
            await asyncio.sleep(0.1)
    raise RuntimeError(f"the run did not end within {STORY_TIMEOUT:g}s")


def _invocations(log_dir: Path) -> list[dict[str, Any]]:
    """The workers' "run invocation ended" log records, in the order they ended."""
    ended = []
    for log in log_dir.glob("*.log"):
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and record.get("message") == "run invocation ended":
                    ended.append(record)
    return sorted(ended, key=lambda r: str(r.get("timestamp")))


async def _observe(aws: _Aws, plans: Sequence[str | None], killed_at: int) -> Observed:
    async with aws.clients() as (db, s3, _sqs):
        threads = DynamoThreadStore(TABLE, client=db, s3_client=s3, bucket=BUCKET)
        store = S3StreamCheckpointStore(BUCKET, prefix=CHECKPOINT_PREFIX, client=s3)
        return Observed(
            messages=await threads.load_messages(THREAD_ID),
            run=await threads.get_run(RUN_ID),
            checkpoint_left=await store.get(RUN_ID) is not None,
            plans=plans,
            killed_at_chars=killed_at,
        )


async def _story(aws: _Aws, log_dir: Path, say: Print) -> Observed:
    started = time.monotonic()
    queue_url = await _setup(aws)
    say(f"1. created thread {THREAD_ID} and queued run {RUN_ID}: {QUESTION!r}")
    function = FunctionConfig(
        "awaken_s3.demo.lambda_app:lambda_handler",
        timeout=WORKER_TIMEOUT,
        env=aws.worker_env(queue_url),
    )
    source = SqsEventSource(
        queue_url,
        function,
        max_concurrency=1,
        endpoint_url=aws.endpoint,
        region="us-east-1",
        poll_interval=0.1,
        log_dir=log_dir,
    )
    async with source:
        say("2. the SQS trigger (emulated) hands the run to worker A, a separate process")
        killed_at = await _kill_mid_stream(aws, source, say)
        say(
            f"3. nobody cleans up after worker A: its queue record comes back about one lease "
            f"({LEASE_SECONDS:g}s) later and a fresh worker process, B, takes the run over"
        )
        await _wait_for_the_end(aws, source, started)
    ended = _invocations(log_dir)
    if not ended:
        raise RuntimeError("no worker invocation ended")
    last = ended[-1]
    say(
        f"  worker B ended {last.get('end')!r} {time.monotonic() - started:.1f}s into the "
        f"story, committed {last.get('turns_committed')} turn(s), recovery plan(s) "
        f"{last.get('plans')}, {last.get('resume_delay') or 0:.1f}s after worker A's last "
        "lease renewal"
    )
    return await _observe(aws, list(last.get("plans") or []), killed_at)


def run_demo(say: Print = print) -> int:
    # Every client of this process talks to the embedded server only: fixed fake credentials,
    # so that no developer's real account is ever used (or needed).
    os.environ.update(FAKE_AWS)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        os.environ.pop(name, None)
    # Werkzeug (under moto's server) logs every request; the story is what matters here.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    started = time.monotonic()
    try:
        say(f"awaken-s3 demo: embedded moto server on http://127.0.0.1:{port}")
        with tempfile.TemporaryDirectory(prefix="awaken-demo-") as logs:
            observed = asyncio.run(_story(_Aws(f"http://127.0.0.1:{port}"), Path(logs), say))
    except Exception as exc:
        say(f"demo FAILED: {exc}")
        return 1
    finally:
        server.stop()
    say("4. the committed thread (DynamoDB):")
    for message in observed.messages:
        say(f"  [{message.role}] {message.text}")
    say(
        f"  run status {observed.run.status.value}, turn {observed.run.turn}, "
        f"checkpoint {'LEFT BEHIND' if observed.checkpoint_left else 'deleted'}"
    )
    problems = check(observed)
    for problem in problems:
        say(f"demo FAILED: {problem}")
    if not problems:
        say(
            f"OK: plan {observed.plans[0]} resumed the turn from {observed.killed_at_chars} "
            f"saved chars; the whole turn was committed once "
            f"({time.monotonic() - started:.1f}s)"
        )
    return 1 if problems else 0
