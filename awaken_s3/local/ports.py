"""Loopback port helpers."""

from __future__ import annotations

import contextlib
import random
import socket
import time


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_pair(offset: int) -> int:
    """A port ``p`` such that ``p`` and ``p + offset`` were both free on 127.0.0.1."""
    for _ in range(200):
        port = random.randint(20000, 65535 - offset)
        with contextlib.ExitStack() as stack:
            try:
                for candidate in (port, port + offset):
                    sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return port
    raise RuntimeError("no free pair of loopback ports")


def wait_for_port(port: int, *, timeout: float = 20.0, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s") from None
            time.sleep(0.05)
