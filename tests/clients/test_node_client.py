"""The TypeScript client's own tests (``node --test``), run from the suite.

They compile the client with ``tsc`` (strict) and run it against the real ``ai`` package's
stream reader and a fake WebSocket + HTTP server the Node test starts on 127.0.0.1 and stops.
``npm ci`` installs the locked dependencies first when ``node_modules`` is missing or older
than ``package-lock.json``. Without Node the test is skipped, except in CI (``CI`` set), where
a missing Node is a failure: CI installs Debian's ``nodejs`` and ``npm``.
"""

from __future__ import annotations

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


def test_the_typescript_client_s_node_tests_pass() -> None:
    npm()
    if not installed(CLIENT):
        done = run_npm("ci", "--no-audit", "--no-fund")
        assert done.returncode == 0, done.stdout + done.stderr
    result = run_npm("test")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # The runner's summary: every test passed, none was skipped by accident.
    assert "# fail 0" in output, output
    assert "# pass 0" not in output, output
