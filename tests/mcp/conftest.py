"""MCP servers on 127.0.0.1 for the tests, each started here and stopped by its PID: the
reference server ``@modelcontextprotocol/server-everything`` (npm, pinned by
node/package-lock.json, installed with ``npm ci`` into a cache directory when missing) and the
counting server."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from awaken_s3.local.ports import free_port, wait_for_port
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.threads import InMemoryThreadStore
from tests.fixtures.clock import FakeClock

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = Path(__file__).resolve().parent / "node"
ENTRY = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"


def _install_dir() -> Path:
    """Where ``npm ci`` installs the pinned packages: a cache outside the repository (no
    linter or type checker walks it), one directory per lock file."""
    lock = (NODE_DIR / "package-lock.json").read_bytes()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "awaken-s3-tests" / f"mcp-node-{hashlib.sha256(lock).hexdigest()[:16]}"


def _install_reference_server() -> Path:
    target = _install_dir()
    if (target / ENTRY).exists():
        return target / ENTRY
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed to run the reference MCP server (CI installs them)")
    target.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(NODE_DIR / name, target / name)
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"], cwd=target, check=True, capture_output=True
    )
    return target / ENTRY


@pytest.fixture(scope="session")
def everything_script() -> Path:
    """The reference server's entry point (``node SCRIPT stdio|streamableHttp``)."""
    return _install_reference_server()


def _stop(proc: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    #: the counting server is killed outright: uvicorn's graceful stop waits on open streams
    sig: signal.Signals = signal.SIGTERM

    def stop(self) -> None:
        _stop(self.process, self.sig)


def serve_everything(script: Path) -> Served:
    port = free_port()
    proc = subprocess.Popen(
        ["node", str(script), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, timeout=60)
    except BaseException:
        _stop(proc)
        raise
    return Served(f"http://127.0.0.1:{port}/mcp", proc)


@pytest.fixture(scope="session")
def everything(everything_script: Path) -> Iterator[str]:
    """The reference server over streamable HTTP: its URL."""
    served = serve_everything(everything_script)
    try:
        yield served.url
    finally:
        served.stop()


def serve_counting(records: Path) -> Served:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp.counting_server", str(port), str(records)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, timeout=60)
    except BaseException:
        _stop(proc)
        raise
    return Served(f"http://127.0.0.1:{port}/mcp", proc, signal.SIGKILL)


@pytest.fixture
def counting(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The counting server: its URL and the file its calls are recorded in."""
    records = tmp_path / "calls.jsonl"
    served = serve_counting(records)
    try:
        yield served.url, records
    finally:
        served.stop()


@pytest.fixture
def threads(clock: FakeClock) -> InMemoryThreadStore:
    return InMemoryThreadStore(clock=clock)


@pytest.fixture
def checkpoints() -> InMemoryStreamCheckpointStore:
    return InMemoryStreamCheckpointStore()
