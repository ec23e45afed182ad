"""Local Lambda containers: long-lived ``lambda_host`` processes, each in its own session.

A container imports the function's handler once (its cold start) and then serves one
invocation at a time. The event source enforces the deadline: when it passes, the container's
process group is SIGKILLed, as Lambda tears a timed-out runtime down. Every container is
stopped by its PID (its process group id, since it leads its own session); a container still
running when the interpreter exits is killed by an ``atexit`` hook, and on Linux each one also
asks the kernel to kill it if the thread that started it dies.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from awaken_s3.errors import AwakenError
from awaken_s3.local.batch_response import Outcome
from awaken_s3.local.lambda_context import (
    InvocationHeaders,
    container_environment,
    new_log_stream_name,
)

#: a reply line can hold a whole response (Lambda allows 6 MB) and an event up to 10 x 256 KiB
_LINE_LIMIT = 16 * 1024 * 1024
#: pids of containers not yet reaped, for the atexit safety net
_LIVE: set[int] = set()


@dataclass(frozen=True)
class FunctionConfig:
    """The Lambda function the event source invokes."""

    #: ``package.module:function`` (or ``package.module.function``), importable from ``cwd``
    handler: str
    #: seconds; the invocation's deadline (Lambda takes whole seconds, 1 to 900)
    timeout: float
    #: the function's environment, on top of this process's own
    env: Mapping[str, str] = field(default_factory=dict)
    #: reported to the handler (``memory_limit_in_mb``); not enforced
    memory_mb: int = 1024
    name: str = "worker"
    #: the containers' working directory (``sys.path[0]``); None: this process's
    cwd: str | None = None
    #: seconds a container may spend importing the handler (Lambda allows 10; a loaded local
    #: machine needs more)
    init_timeout: float = 30.0

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError("timeout must be positive")
        if not self.name:
            raise ValueError("name must not be empty")


@dataclass(frozen=True)
class HostReply:
    """How one invocation ended in its container."""

    outcome: Outcome
    response: Any = None
    #: ``errorType: errorMessage``, or why the process ended
    error: str | None = None


class InitFailed(AwakenError, RuntimeError):
    """The container could not import the handler (or took too long)."""


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


@atexit.register
def _kill_leftovers() -> None:
    for pid in list(_LIVE):
        _kill_group(pid)


def _open_log(log_dir: Path, log_stream_name: str) -> IO[bytes]:
    log_dir.mkdir(parents=True, exist_ok=True)
    return (log_dir / (log_stream_name.replace("/", "-") + ".log")).open("ab")


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"Runtime.ExitError: killed by signal {signal.Signals(-returncode).name}"
    return f"Runtime.ExitError: exited with status {returncode}"


class Container:
    """One running ``lambda_host`` process."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        log_stream_name: str,
        log: IO[bytes] | None,
        *,
        init_timeout: float,
    ) -> None:
        self._process = process
        self._log = log
        self._init_timeout = init_timeout
        self.pid = process.pid
        self.log_stream_name = log_stream_name
        self.invocations = 0

    @classmethod
    async def spawn(
        cls,
        function: FunctionConfig,
        *,
        region: str,
        log_dir: Path | None = None,
    ) -> Container:
        """Start a container's process; :meth:`ready` waits for its init."""
        stream = new_log_stream_name()
        cwd = function.cwd or os.getcwd()
        env = {**os.environ, **function.env}
        env.update(
            container_environment(
                function_name=function.name,
                handler=function.handler,
                memory_mb=function.memory_mb,
                region=region,
                log_stream_name=stream,
                task_root=cwd,
            ),
            PYTHONUNBUFFERED="1",
            AWAKEN_LOCAL_PARENT_PID=str(os.getpid()),
        )
        log = _open_log(log_dir, stream) if log_dir is not None else None
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "awaken_s3.local.lambda_host",
                function.handler,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                cwd=cwd,
                env=env,
                start_new_session=True,
                limit=_LINE_LIMIT,
            )
        except BaseException:
            if log is not None:
                log.close()
            raise
        _LIVE.add(process.pid)
        return cls(process, stream, log, init_timeout=function.init_timeout)

    async def ready(self) -> None:
        """Wait for the handler's import; raises :class:`InitFailed` (the caller closes)."""
        timeout = self._init_timeout
        try:
            line = await asyncio.wait_for(self._readline(), timeout)
        except TimeoutError:
            raise InitFailed(f"Runtime.InitTimeout: init took longer than {timeout}s") from None
        if not line:
            returncode = await self._process.wait()
            raise InitFailed(f"init failed: {_describe_exit(returncode)}")
        reply = json.loads(line)
        if reply.get("type") != "ready":
            raise InitFailed(f"{reply.get('errorType')}: {reply.get('errorMessage')}")

    @property
    def alive(self) -> bool:
        return self._process.returncode is None

    async def invoke(self, event: Mapping[str, Any], headers: InvocationHeaders) -> HostReply:
        """Run one invocation; the container is SIGKILLed when ``headers.deadline_ms`` passes."""
        self.invocations += 1
        request = {"headers": headers.to_wire(), "event": event}
        assert self._process.stdin is not None
        try:
            self._process.stdin.write((json.dumps(request) + "\n").encode("utf-8"))
            await self._process.stdin.drain()
            line = await asyncio.wait_for(
                self._readline(), max(0.0, headers.deadline_ms / 1000 - time.time())
            )
        except TimeoutError:
            self.kill()
            await self._process.wait()
            return HostReply("timeout", error="Sandbox.Timedout: the task timed out")
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        if not line:
            return await self._ended()
        reply = json.loads(line)
        if reply.get("type") == "result":
            return HostReply("ok", response=reply.get("response"))
        return HostReply("error", error=f"{reply.get('errorType')}: {reply.get('errorMessage')}")

    async def _ended(self) -> HostReply:
        returncode = await self._process.wait()
        if returncode == -signal.SIGKILL:
            return HostReply("killed", error="the container was SIGKILLed")
        return HostReply("error", error=_describe_exit(returncode))

    async def _readline(self) -> bytes:
        assert self._process.stdout is not None
        return await self._process.stdout.readline()

    def kill(self) -> bool:
        """SIGKILL the container's process group; False if it had already ended."""
        if not self.alive:
            return False
        _kill_group(self.pid)
        return True

    def freeze(self, frozen: bool) -> bool:
        """SIGSTOP (``frozen``) or SIGCONT the container's process group: a container that
        stops making progress without dying (a GC pause, a host that froze it); False if it
        had already ended. Its invocation's deadline keeps running meanwhile."""
        if not self.alive:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGSTOP if frozen else signal.SIGCONT)
        return True

    async def close(self) -> None:
        """Kill the container (if it still runs) and reap it."""
        self.kill()
        with contextlib.suppress(ProcessLookupError):
            await self._process.wait()
        _LIVE.discard(self.pid)
        if self._process.stdin is not None:
            self._process.stdin.close()
        if self._log is not None:
            self._log.close()
