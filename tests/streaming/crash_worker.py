"""A worker process for the cross-process tests: streams, checkpoints, then hangs.

Run as ``python -m tests.streaming.crash_worker fs DIR`` or
``python -m tests.streaming.crash_worker s3 ENDPOINT BUCKET``. It streams
:data:`STREAMED` through a TurnRunner, waits until that text is in its store,
prints ``READY`` and then stalls until the test kills it with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

from awaken_s3.messages import Message
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.streaming.scripted import ScriptedProvider, Stall, text_deltas
from awaken_s3.streaming.turn_request import TurnRequest

RUN_ID = "run-x"
THREAD_ID = "thread-x"
STREAMED = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. "
REQUEST = ModelRequest(model="scripted-model", messages=(Message.user("Write Latin."),))


@contextlib.asynccontextmanager
async def open_store(argv: list[str]) -> AsyncIterator[Any]:
    if argv[0] == "fs":
        from awaken_s3.stores.fs import FsStreamCheckpointStore

        store = FsStreamCheckpointStore(argv[1])
        try:
            yield store
        finally:
            store.close()
        return
    import aioboto3

    from awaken_s3.stores.s3 import S3StreamCheckpointStore

    session = aioboto3.Session()
    async with session.client("s3", endpoint_url=argv[1], region_name="us-east-1") as client:
        yield S3StreamCheckpointStore(argv[2], client=client)


async def main(argv: list[str]) -> None:
    async with open_store(argv) as store:
        provider = ScriptedProvider([[*text_deltas(STREAMED, chunk=4), Stall()]])
        runner = TurnRunner(
            provider,
            store,
            writer_id="worker-doomed",
            checkpoint_policy=CheckpointPolicy(min_interval=0.0, min_bytes=0),
        )
        turn = asyncio.create_task(
            runner.run_turn(
                TurnRequest(run_id=RUN_ID, thread_id=THREAD_ID, turn=0, epoch=1, request=REQUEST)
            )
        )
        while True:
            stored = await store.get(RUN_ID)
            if stored is not None and stored.checkpoint.partial_text == STREAMED:
                break
            await asyncio.sleep(0.01)
        print("READY", flush=True)
        await turn  # stalls until SIGKILL


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
