"""A local EventBridge schedule: invoke a function every ``rate`` seconds in a local container.

What the template's ``Schedule`` event with reserved concurrency 1 does for the sweeper: a
scheduled event every ``rate`` seconds, one invocation at a time (a tick that comes while the
previous invocation still runs is skipped, as Lambda throttles the second one), in a container
that stays warm between invocations and is replaced when it dies. The event is EventBridge's
"Scheduled Event"; the context has the function's deadline, as for the SQS event source
(:mod:`.event_source`). Differences: a throttled tick is dropped here, where EventBridge
retries it later; the first tick comes ``rate`` seconds after :meth:`start` (or at once with
``first_at_once``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from awaken_s3.local.containers import Container, FunctionConfig, HostReply, InitFailed
from awaken_s3.local.lambda_context import InvocationHeaders, function_arn

__all__ = ["ScheduledFunction", "scheduled_event"]

ACCOUNT = "123456789012"


def scheduled_event(*, region: str, rule: str, now: datetime | None = None) -> dict[str, Any]:
    """EventBridge's scheduled event for ``rule`` (pure but for the id)."""
    moment = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT,
        "time": moment,
        "region": region,
        "resources": [f"arn:aws:events:{region}:{ACCOUNT}:rule/{rule}"],
        "detail": {},
    }


class ScheduledFunction:
    """``async with ScheduledFunction(function, rate=60) as schedule``; ``results()`` holds
    every invocation's :class:`HostReply`, ``await invoke_now()`` runs one more at once."""

    def __init__(
        self,
        function: FunctionConfig,
        *,
        rate: float,
        region: str = "us-east-1",
        log_dir: Path | None = None,
        first_at_once: bool = False,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.function = function
        self.rate = rate
        self.region = region
        self.log_dir = log_dir
        self.first_at_once = first_at_once
        self._container: Container | None = None
        self._lock = asyncio.Lock()
        self._ticker: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[HostReply]] = set()
        self._results: list[HostReply] = []
        #: ticks dropped because the previous invocation still ran
        self.throttled = 0

    def results(self) -> list[HostReply]:
        return list(self._results)

    async def start(self) -> None:
        self._ticker = asyncio.create_task(self._tick(), name=f"schedule {self.function.name}")

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        async with self._lock:
            if self._container is not None:
                await self._container.close()
                self._container = None

    async def __aenter__(self) -> ScheduledFunction:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def invoke_now(self) -> HostReply:
        """One invocation now, after the one running (if any)."""
        async with self._lock:
            return await self._invoke()

    async def _tick(self) -> None:
        next_at = time.monotonic() + (0.0 if self.first_at_once else self.rate)
        while True:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += self.rate
            if self._lock.locked():
                self.throttled += 1
                continue
            task = asyncio.create_task(self.invoke_now())
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _invoke(self) -> HostReply:
        try:
            container = await self._warm()
        except InitFailed as exc:
            reply = HostReply("error", error=str(exc))
        else:
            deadline_ms = int((time.time() + self.function.timeout) * 1000)
            headers = InvocationHeaders(
                str(uuid.uuid4()),
                function_arn(self.region, ACCOUNT, self.function.name),
                deadline_ms,
            )
            event = scheduled_event(region=self.region, rule=f"{self.function.name}-schedule")
            reply = await container.invoke(event, headers)
            if not container.alive:
                await container.close()
                self._container = None
        self._results.append(reply)
        return reply

    async def _warm(self) -> Container:
        if self._container is not None and self._container.alive:
            return self._container
        container = await Container.spawn(self.function, region=self.region, log_dir=self.log_dir)
        try:
            await container.ready()
        except BaseException:
            await container.close()
            raise
        self._container = container
        return container
