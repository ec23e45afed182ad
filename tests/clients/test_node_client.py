"""The TypeScript client's own tests (``node --test``), run from the suite.

They compile the client with ``tsc`` (strict) and run it against the real ``ai`` package's
stream reader and a fake WebSocket + HTTP server the Node test starts on 127.0.0.1 and stops.
``npm ci`` installs the locked dependencies first when ``node_modules`` is missing or older
than ``package-lock.json``, and the build is done once for the sources as they are. Without
Node the test is skipped, except in CI (``CI`` set), where a missing Node is a failure: CI
installs Debian's ``nodejs`` and ``npm``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

import pytest

from tests.clients.ts_protocol import ROOT

CLIENT: Final = ROOT / "clients" / "typescript"
#: an upper bound only a hung run reaches (npm ci on a cold cache included)
HUNG: Final = 600.0


def npm() -> str:
    found = shutil.which("npm")
    if found is None or shutil.which("node") is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs Node 20 and npm (Debian: apt-get install nodejs npm)")
        pytest.skip("Node and npm are not installed (Debian: apt-get install nodejs npm)")
    return found


def installed(client: Path) -> bool:
    marker = client / "node_modules" / ".package-lock.json"
    lock = client / "package-lock.json"
    return marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime


def run_npm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [npm(), *args],
        cwd=CLIENT,
        capture_output=True,
        text=True,
        timeout=HUNG,
        env={**os.environ, **(env or {})},
        check=False,
    )


def sources_digest() -> str:
    digest = hashlib.sha256()
    parts = [CLIENT / "package-lock.json", *sorted(CLIENT.glob("tsconfig*.json"))]
    parts += sorted(CLIENT.glob("src/**/*.ts")) + sorted(CLIENT.glob("test/**/*.ts"))
    for path in parts:
        digest.update(str(path.relative_to(CLIENT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def built_client() -> Path:
    """The client and its tests compiled (strict), dependencies installed first: once for
    every test of the session under a file lock, as xdist workers may ask at the same time."""
    npm()
    with (CLIENT / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed(CLIENT):
            done = run_npm("ci", "--no-audit", "--no-fund")
            assert done.returncode == 0, done.stdout + done.stderr
        stamp = CLIENT / "dist-test" / ".sources"
        digest = sources_digest()
        if not stamp.exists() or stamp.read_text() != digest:
            # From scratch: a test file deleted from test/ must not run from an old build.
            shutil.rmtree(stamp.parent, ignore_errors=True)
            built = run_npm("run", "build:test")
            assert built.returncode == 0, built.stdout + built.stderr
            stamp.write_text(digest)
    return CLIENT / "dist-test" / "test"


def test_the_typescript_client_s_node_tests_pass() -> None:
    tests = sorted(str(path) for path in built_client().glob("*.test.js"))
    assert len(tests) >= 4, tests
    result = run_npm("exec", "--", "node", "--test", *tests)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # The runner's summary: every test passed, none was skipped by accident.
    assert "# fail 0" in output, output
    assert "# skipped 0" in output, output
    assert "# pass 0" not in output, output
