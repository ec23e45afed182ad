"""A user's program in its own process, SIGKILLed once its checkpoint holds what the test
waited for, then run again to the end."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from awaken_s3 import StreamCheckpoint
from awaken_s3.models import decode_checkpoint
from awaken_s3.stores.fs import SUFFIX, decode_file

REPO = Path(__file__).resolve().parents[2]
#: a bound only a hung test reaches (the waits are on events: a checkpoint, an exit)
BOUND = 120.0


def read_checkpoint(directory: Path, key: str) -> StreamCheckpoint | None:
    """The checkpoint as the store would read it: the program's process owns the store's
    directory, and its writes are atomic renames."""
    try:
        data = (directory / f"{key}{SUFFIX}").read_bytes()
    except FileNotFoundError:
        return None
    _, body = decode_file(data, run_id=key)
    return decode_checkpoint(body, run_id=key)


async def start(
    argv: Sequence[str], env: Mapping[str, str] | None = None
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


async def kill_when(
    argv: Sequence[str],
    saved: Callable[[StreamCheckpoint], bool],
    *,
    directory: Path,
    key: str,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run ``argv`` until the checkpoint under ``key`` satisfies ``saved``, then SIGKILL it."""
    process = await start(argv, env)
    try:
        async with asyncio.timeout(BOUND):
            while True:
                checkpoint = read_checkpoint(directory, key)
                if checkpoint is not None and saved(checkpoint):
                    break
                if process.returncode is not None:
                    _, err = await process.communicate()
                    raise AssertionError(f"the program ended before the cut: {err.decode()}")
                await asyncio.sleep(0.02)
    finally:
        if process.returncode is None:
            os.kill(process.pid, signal.SIGKILL)
        await process.wait()
    assert process.returncode == -signal.SIGKILL


async def run(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """Run ``argv`` to its end; its standard output."""
    process = await start(argv, env)
    async with asyncio.timeout(BOUND):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()
