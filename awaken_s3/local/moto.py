"""A moto server in a child process, bound to 127.0.0.1, stopped by its PID.

A separate process (rather than ``ThreadedMotoServer``) lets several OS
processes share one fake AWS, and lets a test kill a worker without taking
the fake AWS down with it.

The process is ``python -m awaken_s3.local.moto PORT``: moto's own server application, with
SQS's receipt-handle rules where moto is laxer (:mod:`awaken_s3.local.sqs_receipts`), so
that a worker's late acknowledgement cannot delete a record another worker now holds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from awaken_s3.local.ports import free_port, wait_for_port

#: wraps moto's WSGI application (the soak's server applies one request at a time)
AppWrapper = Callable[[Any], Any]


def serve(port: int, *, host: str = "127.0.0.1", wrap: AppWrapper | None = None) -> None:
    """Serve moto on ``host:port`` until the process is stopped (what ``moto_server`` does,
    with SQS's receipt-handle rules installed first)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    from awaken_s3.local.sqs_receipts import install

    install()
    # moto builds queue URLs (and other resource URLs) from it.
    os.environ.setdefault("MOTO_PORT", str(port))
    app: Any = DomainDispatcherApplication(create_backend_app)
    if wrap is not None:
        app = wrap(app)
    run_simple(host, port, app, threaded=True, request_handler=MotoRequestHandler)


@dataclass
class MotoServer:
    endpoint_url: str
    port: int
    pid: int
    _process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, *, port: int | None = None, timeout: float = 30.0) -> MotoServer:
        port = port or free_port()
        cmd = [sys.executable, "-m", "awaken_s3.local.moto", str(port)]
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


if __name__ == "__main__":
    serve(int(sys.argv[1]))
