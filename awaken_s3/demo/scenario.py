"""``awaken-s3 demo``: kill a worker mid-stream, resume the turn in a new process.

Everything runs on an embedded default: an in-process moto server on 127.0.0.1
stands in for S3 and DynamoDB, and a scripted model streams a known answer. The
demo exits non-zero when the resumed thread is not exactly the whole turn,
committed once, with the checkpoint gone.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aioboto3
from moto.server import ThreadedMotoServer

from awaken_s3.demo.model import ANSWER
from awaken_s3.demo.settings import BUCKET, CHECKPOINT_PREFIX, TABLE
from awaken_s3.local.ports import free_port
from awaken_s3.messages import Message
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.threads.dynamo import DynamoThreadStore, create_table, dynamodb_client_config
from awaken_s3.threads.models import RunSettings, RunState, RunStatus

THREAD_ID = "demo-thread"
RUN_ID = "demo-run"
QUESTION = "How does awaken-s3 keep a streaming turn alive when its process dies?"
#: kill the first worker once this share of the answer is checkpointed
KILL_AT = 0.4
WORKER_TIMEOUT = 60.0

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
        self.env = {
            **os.environ,
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "demo",
            "AWS_SECRET_ACCESS_KEY": "demo",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWAKEN_BUCKET": BUCKET,
            "AWAKEN_TABLE": TABLE,
        }
        self.env.pop("AWS_PROFILE", None)
        self.env.pop("AWS_SESSION_TOKEN", None)
        self.session = aioboto3.Session(
            aws_access_key_id="demo", aws_secret_access_key="demo", region_name="us-east-1"
        )

    def clients(self) -> Any:
        return _Clients(self)


class _Clients:
    def __init__(self, aws: _Aws) -> None:
        self._aws = aws

    async def __aenter__(self) -> tuple[Any, Any]:
        s = self._aws.session
        self._db_cm = s.client(
            "dynamodb", endpoint_url=self._aws.endpoint, config=dynamodb_client_config()
        )
        self._s3_cm = s.client("s3", endpoint_url=self._aws.endpoint)
        db = await self._db_cm.__aenter__()
        s3 = await self._s3_cm.__aenter__()
        return db, s3

    async def __aexit__(self, *exc: object) -> None:
        await self._s3_cm.__aexit__(None, None, None)
        await self._db_cm.__aexit__(None, None, None)


async def _setup(aws: _Aws) -> None:
    async with aws.clients() as (db, s3):
        await s3.create_bucket(Bucket=BUCKET)
        await create_table(db, TABLE)
        threads = DynamoThreadStore(TABLE, client=db, s3_client=s3, bucket=BUCKET)
        await threads.create_thread(THREAD_ID, owner="demo-user")
        await threads.create_run(
            RUN_ID,
            thread_id=THREAD_ID,
            owner="demo-user",
            settings=RunSettings(model="demo-model", max_tokens=1024),
            messages=[Message.user(QUESTION)],
        )


def _spawn(aws: _Aws, worker: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "awaken_s3.demo.worker", RUN_ID, worker],
        env=aws.env,
        stdout=subprocess.PIPE,
        text=True,
    )


async def _kill_mid_stream(aws: _Aws, proc: subprocess.Popen[str], say: Print) -> int:
    """SIGKILL ``proc`` once its checkpoint holds KILL_AT of the answer; return the chars saved."""
    async with aws.clients() as (_db, s3):
        store = S3StreamCheckpointStore(BUCKET, prefix=CHECKPOINT_PREFIX, client=s3)
        deadline = time.monotonic() + WORKER_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("worker A finished before it could be killed mid-stream")
            stored = await store.get(RUN_ID)
            if stored and len(stored.checkpoint.partial_text) >= KILL_AT * len(ANSWER):
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                # The final word on what survived is the object as it stands now.
                after = await store.get(RUN_ID)
                assert after is not None
                cp = after.checkpoint
                say(
                    f"  SIGKILLed worker A (pid {proc.pid}) mid-stream; its checkpoint survives:\n"
                    f"    s3://{BUCKET}/{CHECKPOINT_PREFIX}{RUN_ID}.json  etag {after.version}\n"
                    f"    turn {cp.turn}, epoch {cp.epoch}, writer {cp.writer}, "
                    f"{len(cp.partial_text)} of {len(ANSWER)} chars: "
                    f"...{cp.partial_text[-48:]!r}"
                )
                return len(cp.partial_text)
            await asyncio.sleep(0.05)
    proc.kill()
    raise RuntimeError("worker A wrote no checkpoint in time")


async def _wait_for_lease(aws: _Aws, say: Print) -> None:
    async with aws.clients() as (db, s3):
        threads = DynamoThreadStore(TABLE, client=db, s3_client=s3, bucket=BUCKET)
        run = await threads.get_run(RUN_ID)
    wait = max(0.0, run.lease.lease_until - time.time()) + 0.1
    say(f"  the dead worker's lease (epoch {run.lease.epoch}) expires in {wait:.1f}s; waiting")
    await asyncio.sleep(wait)


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=WORKER_TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"worker B exited with {proc.returncode}")
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return report


async def _observe(aws: _Aws, plans: Sequence[str | None], killed_at: int) -> Observed:
    async with aws.clients() as (db, s3):
        threads = DynamoThreadStore(TABLE, client=db, s3_client=s3, bucket=BUCKET)
        store = S3StreamCheckpointStore(BUCKET, prefix=CHECKPOINT_PREFIX, client=s3)
        return Observed(
            messages=await threads.load_messages(THREAD_ID),
            run=await threads.get_run(RUN_ID),
            checkpoint_left=await store.get(RUN_ID) is not None,
            plans=plans,
            killed_at_chars=killed_at,
        )


async def _story(aws: _Aws, say: Print) -> Observed:
    await _setup(aws)
    say(f"1. created thread {THREAD_ID} and queued run {RUN_ID}: {QUESTION!r}")
    say("2. worker A (a separate process) claims the run and streams the turn")
    killed_at = await _kill_mid_stream(aws, _spawn(aws, "worker-a"), say)
    say("3. a new process, worker B, picks the run up")
    await _wait_for_lease(aws, say)
    report = await asyncio.to_thread(_finish, _spawn(aws, "worker-b"))
    say(
        f"  worker B (pid {report['pid']}) ended {report['end']!r}, committed "
        f"{report['turns_committed']} turn(s), recovery plan(s) {report['plans']}"
    )
    return await _observe(aws, report["plans"], killed_at)


def run_demo(say: Print = print) -> int:
    # Werkzeug (under moto's server) logs every request; the story is what matters here.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    started = time.monotonic()
    try:
        say(f"awaken-s3 demo: embedded moto server on http://127.0.0.1:{port}")
        observed = asyncio.run(_story(_Aws(f"http://127.0.0.1:{port}"), say))
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
