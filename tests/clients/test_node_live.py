"""The TypeScript transport against the real ``awaken-s3 dev`` (started here on 127.0.0.1 and
stopped by its PID): a chat whose worker is SIGKILLed mid-answer shows the committed turn
exactly, resumed with R1 (``clients/typescript/test/live-dev.ts``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.clients.test_node_client import built_client, run_npm
from tests.dev.conftest import DevServer, alive, dev_server_factory, eventually

pytestmark = pytest.mark.slow
__all__ = ["dev_server_factory"]  # the fixture, used by name

FAST = ("--scripted-delay", "0.05", "--lease-seconds", "4", "--sweep-interval", "0")


def test_a_chat_over_the_dev_server_survives_a_killed_worker(
    dev_server_factory: Callable[..., DevServer], tmp_path: Path
) -> None:
    live = built_client() / "live-dev.js"
    server = dev_server_factory(*FAST, "--require-token")
    assert server.token
    killed = tmp_path / "killed"
    killed.touch()
    result = run_npm(
        "exec",
        "--",
        "node",
        "--test",
        str(live),
        env={
            "AWAKEN_DEV_URL": server.url,
            "AWAKEN_DEV_TOKEN": server.token,
            "AWAKEN_KILLED_FILE": str(killed),
        },
    )
    pids = [int(line) for line in killed.read_text().split()]
    server.children.update(pids)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output + server.banner()[-3000:]
    assert "# pass 1" in output, output
    (pid,) = pids
    eventually(lambda: not alive(pid), what=f"killed worker {pid} to be gone")
