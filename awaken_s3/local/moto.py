"""A moto server in a child process, bound to 127.0.0.1, stopped by its PID.

A separate process (rather than ``ThreadedMotoServer``) lets several OS
processes share one fake AWS, and lets a test kill a worker without taking
the fake AWS down with it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from types import TracebackType

from awaken_s3.local.ports import free_port, wait_for_port


@dataclass
class MotoServer:
    endpoint_url: str
    port: int
    pid: int
    _process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, *, port: int | None = None, timeout: float = 30.0) -> MotoServer:
        port = port or free_port()
        exe = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or shutil.which(
            "moto_server"
        )
        cmd = (
            [exe, "-H", "127.0.0.1", "-p", str(port)]
            if exe
            else [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        )
        process = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            wait_for_port(port, timeout=timeout)
        except TimeoutError:
            process.kill()
            process.wait()
            raise
        return cls(f"http://127.0.0.1:{port}", port, process.pid, process)

    def reset(self) -> None:
        """Drop every resource (moto's reset API), for test isolation."""
        import urllib.request

        req = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass

    def stop(self) -> None:
        if self._process.poll() is not None:
            return
        os.kill(self.pid, signal.SIGTERM)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self._process.wait()

    def __enter__(self) -> MotoServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
