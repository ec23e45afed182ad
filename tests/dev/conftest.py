"""Start `awaken-s3 dev` as a user does (a subprocess from the repository root), wait until it
answers, and stop it by its PID: SIGINT, as Ctrl-C sends, then a check that every process it
started (the moto server, the worker containers) is gone."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from awaken_s3.local.ports import free_port
from tests.fixtures.processes import eventually_sync, process_gone

ROOT = Path(__file__).resolve().parents[2]
#: an upper bound only a hung test reaches
HUNG = 90.0


def eventually(condition: Callable[[], bool], *, what: str, bound: float = HUNG) -> None:
    eventually_sync(condition, what=what, bound=bound)


def alive(pid: int) -> bool:
    return not process_gone(pid)


@dataclass
class DevServer:
    url: str
    process: subprocess.Popen[bytes]
    output: Path
    token: str | None = None
    #: every pid the test saw the server start (moto, worker containers)
    children: set[int] = field(default_factory=set)

    def banner(self) -> str:
        return self.output.read_text(errors="replace")

    def client(self, *, token: str | None = None) -> httpx.Client:
        headers = {}
        if token or self.token:
            headers["Authorization"] = f"Bearer {token or self.token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)

    def stop(self) -> int:
        """Ctrl-C, by PID; the exit status."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError("awaken-s3 dev did not stop on SIGINT") from None
        return int(self.process.returncode)


def start_dev_server(
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
    cwd: Path = ROOT,
) -> DevServer:
    """``command``: how to invoke awaken-s3 (default: this interpreter's ``-m awaken_s3.cli``;
    a user's test passes the installed script); ``cwd``: where it runs (a user's project)."""
    port = free_port()
    output = tmp_path / f"dev-{port}.out"
    command = [
        *(command or [sys.executable, "-m", "awaken_s3.cli"]),
        "dev",
        "--port",
        str(port),
        *args,
    ]
    environ = {**os.environ, **(env or {})}
    for name in ("AWS_ENDPOINT_URL", "AWAKEN_BUCKET", "AWAKEN_TABLE", "AWAKEN_QUEUE_URL"):
        environ.pop(name, None)
    with output.open("wb") as sink:
        process = subprocess.Popen(
            command, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT, env=environ
        )
    server = DevServer(f"http://127.0.0.1:{port}", process, output)
    eventually(
        lambda: "Ctrl-C stops everything" in server.banner() or process.poll() is not None,
        what="awaken-s3 dev to print its banner",
    )
    if process.poll() is not None:
        raise AssertionError(f"awaken-s3 dev exited:\n{server.banner()}")
    found = re.search(r"moto on \S+ \(pid (\d+)\)", server.banner())
    if found:
        server.children.add(int(found.group(1)))
    token = re.search(r"Authorization: Bearer (\S+)", server.banner())
    server.token = token.group(1) if token else None
    return server


@pytest.fixture
def dev_server_factory(tmp_path: Path) -> Iterator[Callable[..., DevServer]]:
    servers: list[DevServer] = []

    def start(
        *args: str,
        env: dict[str, str] | None = None,
        command: list[str] | None = None,
        cwd: Path = ROOT,
    ) -> DevServer:
        server = start_dev_server(tmp_path, *args, env=env, command=command, cwd=cwd)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
        for pid in server.children:
            if alive(pid):  # a leak: stop it anyway, by its pid, and fail
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"awaken-s3 dev left pid {pid} running")
