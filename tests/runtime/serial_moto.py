"""A moto server that applies one request at a time (``python -m tests.runtime.serial_moto PORT``).

moto serves requests on several threads and does not isolate them: a conditional write is a
check followed by a write, and a cancelled ``TransactWriteItems`` rolls back by restoring a
snapshot of the whole table — erasing any other request that landed meanwhile. Real DynamoDB
(and S3's conditional writes) are linearizable per item and isolate transactions. Racing
workers against plain moto therefore see anomalies the real services never produce (two
claims of one lease, a successful commit undone by a concurrent failed one), so the race
tests run against this server: moto's own application, one request at a time (and, as every
local server, SQS's receipt-handle rules: awaken_s3.local.sqs_receipts).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from awaken_s3.local.moto import serve
from awaken_s3.local.ports import free_port, wait_for_port


def serial_app(app: Any) -> Any:
    lock = threading.Lock()

    def serialised(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        with lock:
            result = app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        return [body]

    return serialised


def main() -> None:
    # With SQS's receipt-handle rules, as every local server (awaken_s3.local.moto).
    serve(int(sys.argv[1]), wrap=serial_app)


@contextmanager
def serial_moto() -> Iterator[str]:
    """Start the server in a child process on 127.0.0.1; stop it by its PID."""
    port = free_port()
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.runtime.serial_moto", str(port)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "MOTO_PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, timeout=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
