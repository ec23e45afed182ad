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

The story is judged from what is stored (the run item, the thread, the bucket) and from how
the worker processes ended, never from their log lines: a caller's ``POWERTOOLS_LOG_LEVEL``
changes nothing (the workers' level is set here, for their logs alone).
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
from awaken_s3.local.event_source import FunctionConfig, InvocationResult, SqsEventSource
from awaken_s3.local.ports import free_port
from awaken_s3.local.sqs_receipts import install as install_sqs_receipt_rules
from awaken_s3.messages import Message
from awaken_s3.models import StreamCheckpoint
from awaken_s3.service.queue import RunMessage, send_run_message
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.streaming.recovery import plan_recovery
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
    #: the committed thread (DynamoDB)
    messages: Sequence[Message]
    #: the run item (DynamoDB): status, turn, lease epoch, usage
    run: RunState
    #: whether the bucket still holds the run's checkpoint
    checkpoint_left: bool
    #: the plan the checkpoint worker A left implies (what any resuming worker applies to it)
    plan: str
    #: characters of the answer in that checkpoint
    killed_at_chars: int
    #: what a continuation sends of them (the saved text without its trailing whitespace)
    prefix_chars: int
    #: how each worker invocation ended, in order (the event source saw the processes exit)
    outcomes: Sequence[str]


def resumed_usage(prefix_chars: int) -> tuple[int, int]:
    """(input, output) tokens the demo's model reports for a call continuing from
    ``prefix_chars`` saved characters: the prefix is sent, only the rest is generated."""
    return 40 + prefix_chars // 4, (len(ANSWER) - prefix_chars) // 4


def continued_from(usage: tuple[int, int], *, at_least: int) -> int | None:
    """The saved prefix (at least ``at_least`` chars: a put the killed worker had in flight
    may still have landed) whose continuation reports ``usage``; None if none does."""
    return next(
        (n for n in range(at_least, len(ANSWER)) if resumed_usage(n) == usage),
        None,
    )


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
    run = observed.run
    if run.status is not RunStatus.COMPLETED:
        problems.append(f"run status is {run.status.value}, not completed")
    if run.turn != 1:
        problems.append(f"run advanced {run.turn} turns, not 1")
    if run.lease.epoch != 2:
        problems.append(f"the run ended at lease epoch {run.lease.epoch}, not 2 (one takeover)")
    if observed.checkpoint_left:
        problems.append("the checkpoint was not deleted after the commit")
    if observed.plan != "R1":
        problems.append(f"worker A's checkpoint implies plan {observed.plan}, not R1")
    if not 0 < observed.killed_at_chars < len(ANSWER):
        problems.append("the first worker was not killed mid-stream")
    elif (
        continued_from(
            (run.usage.input_tokens, run.usage.output_tokens), at_least=observed.prefix_chars
        )
        is None
    ):
        problems.append(
            f"the committed turn's usage ({run.usage.input_tokens} in, "
            f"{run.usage.output_tokens} out) is not that of a call continuing from the "
            f"{observed.killed_at_chars} saved chars"
        )
    if list(observed.outcomes) != ["killed", "ok"]:
        problems.append(f"worker invocations ended {list(observed.outcomes)}, not ['killed', 'ok']")
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
            # For the workers' own log files (shown when the story fails); nothing is judged
            # from them, whatever level the caller's environment asks for.
            "POWERTOOLS_LOG_LEVEL": "INFO",
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


async def _kill_mid_stream(aws: _Aws, source: SqsEventSource, say: Print) -> StreamCheckpoint:
    """SIGKILL the worker once its checkpoint holds KILL_AT of the answer; what it left."""
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
                where = store.key_at(RUN_ID, after.version)
                say(
                    f"  SIGKILLed worker A (pid {pid}) mid-stream; its checkpoint survives:\n"
                    f"    s3://{BUCKET}/{where}  etag {after.version}\n"
                    f"    turn {cp.turn}, epoch {cp.epoch}, writer {cp.writer[-24:]}, "
                    f"{len(cp.partial_text)} of {len(ANSWER)} chars: "
                    f"...{cp.partial_text[-48:]!r}"
                )
                return cp
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


def _log_tails(log_dir: Path, lines: int = 15) -> list[str]:
    """The last lines of each worker's log, to show why a story failed."""
    tails = []
    for log in sorted(log_dir.glob("*.log")):
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        tails.append(f"--- {log.name}\n" + "\n".join(text))
    return tails


async def _observe(
    aws: _Aws, left: StreamCheckpoint, outcomes: Sequence[InvocationResult]
) -> Observed:
    async with aws.clients() as (db, s3, _sqs):
        threads = DynamoThreadStore(TABLE, client=db, s3_client=s3, bucket=BUCKET)
        store = S3StreamCheckpointStore(BUCKET, prefix=CHECKPOINT_PREFIX, client=s3)
        return Observed(
            messages=await threads.load_messages(THREAD_ID),
            run=await threads.get_run(RUN_ID),
            checkpoint_left=await store.get(RUN_ID) is not None,
            plan=plan_recovery(left).kind,
            killed_at_chars=len(left.partial_text),
            prefix_chars=len(left.partial_text.rstrip()),
            outcomes=[result.outcome for result in outcomes],
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
        left = await _kill_mid_stream(aws, source, say)
        killed = time.time()
        plan = plan_recovery(left)
        say(f"  the partial turn it left implies plan {plan.kind} (text only: continue from it)")
        say(
            f"3. nobody cleans up after worker A: its queue record comes back about one lease "
            f"({LEASE_SECONDS:g}s) later and a fresh worker process, B, takes the run over"
        )
        await _wait_for_the_end(aws, source, started)
    results = source.results()
    observed = await _observe(aws, left, results)
    for name, result in zip("AB", results, strict=False):
        when = f", started {result.started_at - killed:.1f}s after the kill" if name == "B" else ""
        say(f"  worker {name} (pid {result.pid}): {result.outcome}{when}")
    usage = observed.run.usage
    say(
        f"  the run item: {observed.run.status.value} at lease epoch {observed.run.lease.epoch}; "
        f"the resumed call was sent the saved chars "
        f"({usage.input_tokens} input tokens) and generated only the rest "
        f"({usage.output_tokens} output tokens)"
    )
    return observed


def run_demo(say: Print = print) -> int:
    # Every client of this process talks to the embedded server only: fixed fake credentials,
    # so that no developer's real account is ever used (or needed).
    os.environ.update(FAKE_AWS)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        os.environ.pop(name, None)
    # Werkzeug (under moto's server) logs every request; the story is what matters here.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    # SQS's receipt-handle rules where moto is laxer: a dead worker's late acknowledgement
    # must not delete the record its successor holds.
    install_sqs_receipt_rules()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    started = time.monotonic()
    try:
        say(f"awaken-s3 demo: embedded moto server on http://127.0.0.1:{port}")
        with tempfile.TemporaryDirectory(prefix="awaken-demo-") as logs:
            try:
                observed = asyncio.run(_story(_Aws(f"http://127.0.0.1:{port}"), Path(logs), say))
            except Exception:
                for tail in _log_tails(Path(logs)):
                    say(tail)
                raise
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
            f"OK: plan {observed.plan} resumed the turn from {observed.killed_at_chars} "
            f"saved chars; the whole turn was committed once "
            f"({time.monotonic() - started:.1f}s)"
        )
    return 1 if problems else 0
