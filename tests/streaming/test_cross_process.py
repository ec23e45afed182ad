"""Cross-process resume: a checkpoint written by one runner, resumed by a fresh
runner with a fresh store object over the same backend."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.local.moto import MotoServer
from awaken_s3.stores.fs import FsStreamCheckpointStore
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.streaming.outcome import TurnCompleted
from awaken_s3.streaming.runner import ATTEMPT_LOST, TurnRunner
from awaken_s3.streaming.scripted import ScriptedProvider, Stall, text_deltas, text_turn
from awaken_s3.streaming.turn_request import TurnRequest
from tests.fixtures.aws import s3_client

from . import crash_worker as worker
from .conftest import EAGER

REPO = Path(__file__).resolve().parents[2]


async def resume_and_finish(store: Any) -> TurnCompleted:
    provider = ScriptedProvider([text_turn("Sed do eiusmod.")])
    runner = TurnRunner(provider, store, writer_id="worker-fresh")
    outcome = await runner.run_turn(
        TurnRequest(
            run_id=worker.RUN_ID,
            thread_id=worker.THREAD_ID,
            turn=0,
            epoch=2,
            request=worker.REQUEST,
        )
    )
    assert isinstance(outcome, TurnCompleted), outcome
    assert list(provider.requests[0].messages)[-1].text == worker.STREAMED.rstrip()
    return outcome


def check_whole_turn(outcome: TurnCompleted) -> None:
    assert outcome.plan_kind == "R1"
    assert outcome.message.text == worker.STREAMED + "Sed do eiusmod."
    assert outcome.retry_count == 1


async def test_a_fresh_runner_and_fs_store_resume_what_another_wrote(tmp_path: Path) -> None:
    first = FsStreamCheckpointStore(tmp_path)
    provider = ScriptedProvider([[*text_deltas(worker.STREAMED), Stall()]])
    runner = TurnRunner(provider, first, writer_id="worker-doomed", checkpoint_policy=EAGER)
    task = asyncio.create_task(
        runner.run_turn(
            TurnRequest(
                run_id=worker.RUN_ID,
                thread_id=worker.THREAD_ID,
                turn=0,
                epoch=1,
                request=worker.REQUEST,
            )
        )
    )

    async def stored_text() -> str:
        stored = await first.get(worker.RUN_ID)
        return stored.checkpoint.partial_text if stored else ""

    async with asyncio.timeout(5):
        while await stored_text() != worker.STREAMED:  # noqa: ASYNC110 - polling the store
            await asyncio.sleep(0.005)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    first.close()

    with FsStreamCheckpointStore(tmp_path) as second:
        check_whole_turn(await resume_and_finish(second))


@contextlib.contextmanager
def killed_worker(*args: str) -> Iterator[None]:
    """Start the crash worker, wait for READY, SIGKILL it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.streaming.crash_worker", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip() == b"READY", line
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        yield
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.slow
async def test_resume_after_sigkill_of_the_writing_process_fs(tmp_path: Path) -> None:
    with killed_worker("fs", str(tmp_path)):
        pass
    with FsStreamCheckpointStore(tmp_path) as store:
        stored = await store.get(worker.RUN_ID)
        assert stored is not None and stored.checkpoint.writer == "worker-doomed"
        outcome = await resume_and_finish(store)
    check_whole_turn(outcome)
    assert outcome.message.text.count(worker.STREAMED) == 1


@pytest.mark.slow
async def test_resume_after_sigkill_of_the_writing_process_s3_on_moto(
    moto_server: MotoServer,
) -> None:
    bucket = "cross-process"
    async with s3_client(moto_server.endpoint_url) as client:
        with contextlib.suppress(Exception):
            await client.create_bucket(Bucket=bucket)
    with killed_worker("s3", moto_server.endpoint_url, bucket):
        pass
    async with s3_client(moto_server.endpoint_url) as client:
        store = S3StreamCheckpointStore(bucket, client=client)
        stored = await store.get(worker.RUN_ID)
        assert stored is not None
        assert stored.checkpoint.partial_text == worker.STREAMED
        outcome = await resume_and_finish(store)
        check_whole_turn(outcome)
        after = await store.get(worker.RUN_ID)
        assert after is not None and after.version == outcome.checkpoint_version
        assert after.checkpoint.retry_count == 1 and after.checkpoint.last_error == ATTEMPT_LOST
