"""The event source's containers: idle ones reused, dead ones replaced, spares kept warm.

:class:`ContainerPool` holds every live container of one function (see :mod:`.containers`).
An invocation checks one out (an idle one, warm, or a new one, cold) and checks it back in
when it ends: a container still alive goes back to the idle list (the most recent first), any
other is discarded and reaped. With ``provisioned``, a background task keeps that many
containers initialized ahead of invocations, as Lambda's provisioned concurrency does. The
observation methods (``infos``, ``pids``, ``kill``, ``freeze``) may be called from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from pathlib import Path

from awaken_s3.local.containers import Container, FunctionConfig, InitFailed
from awaken_s3.local.invocations import ContainerInfo

logger = logging.getLogger(__name__)

#: pause after a provisioned container failed its init before the next try
_INIT_BACKOFF = 1.0


class ContainerPool:
    """The live containers of ``function``. ``region`` may be set until the first spawn (the
    event source learns it from its queue's ARN)."""

    def __init__(
        self, function: FunctionConfig, *, region: str, log_dir: Path | None, provisioned: int
    ) -> None:
        self.function = function
        self.region = region
        self.log_dir = log_dir
        self.provisioned = provisioned
        self._lock = threading.Lock()
        self._containers: dict[int, Container] = {}
        self._idle: list[Container] = []
        self._spawning = 0
        self._provisioner: asyncio.Task[None] | None = None
        self._closing = False

    # -- observation and faults (any thread)

    def infos(self) -> list[ContainerInfo]:
        with self._lock:
            idle = {c.pid for c in self._idle}
            return [
                ContainerInfo(
                    pid=c.pid,
                    log_stream_name=c.log_stream_name,
                    busy=c.pid not in idle,
                    invocations=c.invocations,
                )
                for c in self._containers.values()
            ]

    def pids(self) -> list[int]:
        with self._lock:
            return list(self._containers)

    def kill(self, pid: int) -> bool:
        """SIGKILL the container ``pid``; False if it is not one of this pool's."""
        with self._lock:
            container = self._containers.get(pid)
        return container.kill() if container is not None else False

    def freeze(self, pid: int, frozen: bool) -> bool:
        """SIGSTOP (``frozen=False``: SIGCONT) the container ``pid``; False if it is not one
        of this pool's."""
        with self._lock:
            container = self._containers.get(pid)
        return container.freeze(frozen) if container is not None else False

    def kill_all(self) -> None:
        with self._lock:
            running = list(self._containers.values())
        for container in running:
            container.kill()

    # -- invocations

    async def check_out(self) -> tuple[Container, bool]:
        """An idle container (warm), or a new one (cold)."""
        while True:
            with self._lock:
                container = self._idle.pop() if self._idle else None
            if container is None:
                break
            if container.alive:
                return container, False
            await self.discard(container)
        return await self._spawn(), True

    async def check_in(self, container: Container, *, keep: bool) -> None:
        """Back to the idle list after an invocation (when ``keep`` and it is alive), or
        discarded."""
        if container.alive and keep:
            with self._lock:
                self._idle.append(container)
        else:
            await self.discard(container)

    async def discard(self, container: Container) -> None:
        with self._lock:
            self._containers.pop(container.pid, None)
            if container in self._idle:
                self._idle.remove(container)
        await container.close()

    async def _spawn(self) -> Container:
        """A new, initialized container (not idle yet: the caller decides)."""
        self._spawning += 1
        try:
            container = await Container.spawn(
                self.function, region=self.region, log_dir=self.log_dir
            )
            with self._lock:
                self._containers[container.pid] = container
            try:
                await container.ready()
            except BaseException:
                await self.discard(container)
                raise
            return container
        finally:
            self._spawning -= 1

    # -- provisioned concurrency and shutdown

    def start_provisioning(self) -> None:
        if self.provisioned:
            self._provisioner = asyncio.create_task(self._provision(), name="provisioned")

    async def stop_provisioning(self) -> None:
        self._closing = True
        if self._provisioner is not None:
            self._provisioner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._provisioner

    async def _provision(self) -> None:
        """Keep ``provisioned`` containers initialized, replacing those that died."""
        while not self._closing:
            with self._lock:
                dead = [c for c in self._idle if not c.alive]
            for container in dead:  # an idle one that died (a busy one's invocation reaps it)
                await self.discard(container)
            with self._lock:
                alive = sum(1 for c in self._containers.values() if c.alive)
                missing = self.provisioned - alive - self._spawning
            if missing > 0:
                try:
                    container = await self._spawn()
                except InitFailed as exc:
                    logger.warning("a provisioned container failed its init: %s", exc)
                    await asyncio.sleep(_INIT_BACKOFF)
                    continue
                with self._lock:
                    self._idle.insert(0, container)  # the poller takes the warmest first
                continue
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        """Discard (kill and reap) every container."""
        with self._lock:
            containers = list(self._containers.values())
        for container in containers:
            await self.discard(container)
        with self._lock:
            self._idle.clear()
