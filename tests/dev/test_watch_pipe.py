"""`awaken-s3 runs watch` with its stdout a pipe, as a script or `| tee` meets it: one line per
thing that happened, each one out while the run is still going.

The model is a local OpenAI-compatible server speaking the real wire format
(tests/providers/wire/), reached by `awaken-s3 dev --provider openai` with the real SDK. It
stalls mid-turn until the test kills the worker, and holds the resumed worker's continuation
at a gate until the test opens it, so a line read meanwhile was provably printed while the
run streamed: no timing assumption.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.dev.conftest import HUNG, DevServer
from tests.dev.wire_thread import (
    BEFORE_KILL,
    RESUMED,
    WHOLE_TURN,
    ThreadedWire,
    openai_wire,
    push_interrupted_turn,
    start_dev_on,
)

pytestmark = pytest.mark.slow

AWAKEN_S3 = Path(sys.executable).with_name("awaken-s3")


@pytest.fixture
def wire() -> Iterator[ThreadedWire]:
    with openai_wire() as server:
        yield server


class Watcher:
    """`awaken-s3 runs watch RUN_ID` writing into a pipe; its lines as they arrive."""

    def __init__(self, server: DevServer, run_id: str) -> None:
        env = {**os.environ, "AWAKEN_API_URL": server.url}
        self.process = subprocess.Popen(
            [str(AWAKEN_S3), "runs", "watch", run_id, "--interval", "0.1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def until(self, wanted: Callable[[str], bool]) -> list[str]:
        """Lines up to and including the first one ``wanted`` accepts."""
        lines: list[str] = []
        while True:
            line = self._lines.get(timeout=HUNG)
            assert line is not None, f"the watcher ended before the line; it printed {lines}"
            lines.append(line)
            if wanted(line):
                return lines

    def rest(self) -> list[str]:
        """Every line to the end, and the exit status."""
        lines: list[str] = []
        while (line := self._lines.get(timeout=HUNG)) is not None:
            lines.append(line)
        self.process.wait(timeout=HUNG)
        return lines

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def watch_to_the_end(server: DevServer, run_id: str) -> tuple[list[str], int]:
    """Every line of a watch of ``run_id``, and its exit status."""
    watcher = Watcher(server, run_id)
    try:
        return watcher.rest(), watcher.process.returncode
    finally:
        watcher.stop()


def texts(lines: list[str]) -> str:
    return "".join(json.loads(line.removeprefix("text: ")) for line in lines if "text: " in line)


def start_run(http: httpx.Client, run_id: str) -> None:
    started = http.post("/threads/t1/runs", json={"message": "Say hello", "run_id": run_id})
    assert started.status_code == 202, started.text


def test_a_watch_into_a_pipe_prints_each_change_while_the_run_streams(
    dev_server_factory: Callable[..., DevServer], wire: ThreadedWire
) -> None:
    push_interrupted_turn(wire)
    server = start_dev_on(dev_server_factory, wire)
    with server.client() as http:
        assert http.post("/threads", json={"thread_id": "t1"}).status_code == 201
        start_run(http, "r1")
        watcher = Watcher(server, "r1")
        try:
            seen = watcher.until(lambda line: BEFORE_KILL[-6:] in line)
            # The model stalls mid-turn: the run is still going, and its text is already out.
            assert http.get("/runs/r1").json()["status"] == "running"
            assert any(line.startswith("status: running (turn 0") for line in seen)
            assert texts(seen) == BEFORE_KILL
            assert http.post("/dev/runs/r1/kill").status_code == 200
            # A new worker resumes the turn from its checkpoint and streams on (held at the
            # gate): the watcher says so while it happens.
            resumed = watcher.until(lambda line: RESUMED in line)
            assert "resumed with R1 (turn 0)" in resumed
            assert texts(resumed) == RESUMED
            wire.proceed()
            rest = watcher.rest()
        finally:
            watcher.stop()
    assert watcher.process.returncode == 0, watcher.process.stderr
    assert "status: completed (turn 1, 2 messages committed)" in rest
    assert rest[-2:] == [
        f"committed turn: {json.dumps(WHOLE_TURN)}",
        "run r1 completed after 1 turn(s)",
    ]


def test_a_run_that_fails_before_any_output_shows_its_own_error_not_the_turn_before(
    dev_server_factory: Callable[..., DevServer], wire: ThreadedWire
) -> None:
    d = wire.dialect
    wire.push(d.text_turn([WHOLE_TURN]))
    server = start_dev_on(dev_server_factory, wire)
    with server.client() as http:
        assert http.post("/threads", json={"thread_id": "t1"}).status_code == 201
        start_run(http, "r1")
        assert watch_to_the_end(server, "r1")[0][-1] == "run r1 completed after 1 turn(s)"
        # The provider goes away: the next run on the thread cannot connect at all.
        wire.stop()
        start_run(http, "r2")
        lines, status = watch_to_the_end(server, "r2")
    assert status == 1
    public = "provider_unreachable: the service could not connect to the model provider"
    assert f"error: {public}" in lines
    assert lines[-2:] == ["no turn committed by this run", f"run r2 failed: {public}"]
    # Nothing of the run before: neither its text nor its committed turn.
    assert not any(WHOLE_TURN[:5] in line for line in lines), lines
