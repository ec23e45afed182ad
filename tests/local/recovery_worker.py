"""The real worker handler, with a model and a fault the recovery-path tests steer by files.

* ``RECOVERY_RELEASE`` names a file: a fresh turn streams the first half of the demo's answer,
  then waits for that file to exist before it streams the rest; a turn continuing a saved
  prefix streams the rest at once.
* ``RECOVERY_KILL_AT_CLAIM`` names a file: when it exists as the worker is about to claim a
  run, the worker removes it and SIGKILLs itself (a death between receive and claim).
* ``RECOVERY_CALLS`` names a log: each visibility change and each claim the worker sends is
  appended to it (operation, pid, time), in order.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from awaken_s3.demo.model import ANSWER, ContinuingModel, _prefix_of
from awaken_s3.service.wiring import shared_session
from awaken_s3.service.worker import make_handler
from awaken_s3.streaming.events import StreamEvent, TextDelta
from awaken_s3.streaming.provider import ModelRequest
from tests.fixtures.requests import is_claim

RELEASE = Path(os.environ.get("RECOVERY_RELEASE", "/nonexistent"))
KILL_AT_CLAIM = Path(os.environ.get("RECOVERY_KILL_AT_CLAIM", "/nonexistent"))
CALLS = os.environ.get("RECOVERY_CALLS")


def _note(operation: str) -> None:
    if CALLS:
        with open(CALLS, "a", encoding="utf-8") as log:
            log.write(json.dumps({"op": operation, "pid": os.getpid(), "at": time.time()}) + "\n")


def _before_update(params: dict[str, Any], **_: Any) -> None:
    if not is_claim(params):
        return
    _note("claim")
    try:
        KILL_AT_CLAIM.unlink()
    except FileNotFoundError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


def _visibility(event_name: str, **_: Any) -> None:
    _note(event_name.rsplit(".", 1)[-1])


_hooks = shared_session()._session
_hooks.register("before-parameter-build.dynamodb.UpdateItem", _before_update)
_hooks.register("before-parameter-build.sqs.ChangeMessageVisibility", _visibility)
_hooks.register("before-parameter-build.sqs.ChangeMessageVisibilityBatch", _visibility)


def released() -> bool:
    return RELEASE.exists()


class HalfThenRelease(ContinuingModel):
    def __init__(self) -> None:
        super().__init__(chunk=40, delay=0.01)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        fresh = not _prefix_of(request)
        half = len(ANSWER) // 2
        async for event in super()._stream(request):
            yield event
            if fresh and isinstance(event, TextDelta):
                half -= len(event.text)
                if half <= 0:
                    fresh = False
                    while not released():  # noqa: ASYNC110 - a file is no awaitable
                        await asyncio.sleep(0.02)


lambda_handler = make_handler(provider_factory=HalfThenRelease)
