"""`awaken-s3 dev` as a developer uses it: started from the repository root, talked to over
HTTP with a real client, a run followed through the live partial view while its worker is
killed, and everything it started gone after Ctrl-C."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from awaken_s3.demo.model import ANSWER
from tests.dev.conftest import DevServer, alive, eventually

pytestmark = pytest.mark.slow

FAST = ("--scripted-delay", "0.05", "--lease-seconds", "4", "--sweep-interval", "0")


class PartialFollower:
    """Polls GET /runs/{id}/partial as a client should: If-None-Match, after=, turn=."""

    def __init__(self, http: httpx.Client, run_id: str) -> None:
        self.http = http
        self.run_id = run_id
        self.etag: str | None = None
        self.turn: int | None = None
        self.text = ""
        self.texts: list[str] = []
        self.plans: set[str] = set()
        self.not_modified = 0
        self.last: dict[str, Any] = {}

    def poll(self) -> None:
        params = {} if self.turn is None else {"turn": self.turn, "after": len(self.text)}
        headers = {"If-None-Match": self.etag} if self.etag else {}
        response = self.http.get(f"/runs/{self.run_id}/partial", params=params, headers=headers)
        if response.status_code == 304:
            self.not_modified += 1
            return
        assert response.status_code == 200, response.text
        self.etag = response.headers["ETag"]
        self.last = response.json()
        partial = self.last["partial"]
        if partial is None:
            return
        if partial["turn"] != self.turn:
            self.turn, self.text = partial["turn"], ""
        # What the caller saw is never taken back: the view always continues its text.
        assert partial["offset"] == len(self.text), (partial["offset"], len(self.text))
        self.text += partial["text"]
        self.texts.append(self.text)
        if partial["resumed_with"]:
            self.plans.add(partial["resumed_with"])

    def until(self, condition: Callable[[], bool], what: str) -> None:
        def step() -> bool:
            self.poll()
            return condition()

        eventually(step, what=what)


def test_a_run_followed_over_http_survives_the_kill_of_its_worker(
    dev_server_factory: Callable[..., DevServer],
) -> None:
    server = dev_server_factory(*FAST)
    assert "identity     sub=dev-user" in server.banner()
    assert "export AWAKEN_BUCKET=awaken-dev" in server.banner()
    with server.client() as http:
        assert http.post("/threads", json={"thread_id": "t1"}).status_code == 201
        started = http.post("/threads/t1/runs", json={"message": "why?", "run_id": "r1"})
        assert started.status_code == 202, started.text

        follower = PartialFollower(http, "r1")
        follower.until(lambda: len(follower.text) >= 120, "the first 120 characters")
        workers = http.get("/dev/runs/r1").json()["workers"]
        assert len(workers) == 1
        first = workers[0]["pid"]
        server.children.add(first)

        killed = http.post("/dev/runs/r1/kill")
        assert (killed.status_code, killed.json()) == (200, {"killed": [first]})
        eventually(lambda: not alive(first), what=f"worker {first} to die")
        seen_before_kill = follower.text

        follower.until(lambda: follower.last.get("status") == "completed", "the run to complete")
        internals: dict[str, Any] = {}

        def settled() -> bool:
            # The invocation that committed is settled (records deleted) after the commit.
            internals.update(http.get("/dev/runs/r1").json())
            return len(internals["invocations"]) == 2

        eventually(settled, what="both invocations to be settled")
        outcomes = [(i["pid"], i["outcome"]) for i in internals["invocations"]]
        assert outcomes[0] == (first, "killed") and outcomes[1][1] == "ok"
        server.children.update(pid for pid, _ in outcomes)
        # The resumed worker continued the saved text (plan R1), as its checkpoints say.
        assert [w["resumed_with"] for w in internals["writers"]] == [None, "R1"]

        messages = http.get("/threads/t1").json()["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"]
        committed = "".join(b["text"] for b in messages[1]["content"] if b["type"] == "text")
        assert committed == ANSWER
        # The committed turn extends everything the caller was shown, before and after the kill.
        assert seen_before_kill and all(committed.startswith(text) for text in follower.texts)

        # Polling an unchanged run costs a bare 304.
        before = follower.not_modified
        follower.poll()
        assert follower.not_modified == before + 1

        assert http.post("/dev/runs/r1/kill").status_code == 409  # nothing drives it now
        assert http.get("/nowhere").status_code == 404
    assert server.stop() == 0
    assert "stopping" in server.banner()


def test_require_token_refuses_requests_without_the_bearer_token(
    dev_server_factory: Callable[..., DevServer],
) -> None:
    server = dev_server_factory("--require-token", "--sweep-interval", "0")
    assert server.token and f"#token={server.token}" in server.banner()
    with httpx.Client(base_url=server.url, timeout=30.0) as anonymous:
        assert anonymous.post("/threads", json={}).status_code == 401
        assert anonymous.get("/dev/threads").status_code == 401
        # As on API Gateway: an unknown route is 404 before any authorizer runs.
        assert anonymous.get("/nowhere").status_code == 404
        # The console page itself is public: it asks for the token (from the URL's fragment).
        assert anonymous.get("/").status_code == 200
    with server.client(token="wrong") as wrong:
        assert wrong.post("/threads", json={}).status_code == 401
    with server.client() as http:
        created = http.post("/threads", json={"thread_id": "mine"})
        assert created.status_code == 201
        assert [t["thread_id"] for t in http.get("/dev/threads").json()["threads"]] == ["mine"]


def test_runs_watch_follows_a_run_to_its_committed_turn(
    dev_server_factory: Callable[..., DevServer],
) -> None:
    import subprocess
    import sys

    from tests.dev.conftest import HUNG, ROOT

    server = dev_server_factory(*FAST)
    with server.client() as http:
        assert http.post("/threads", json={"thread_id": "t1"}).status_code == 201
        started = http.post("/threads/t1/runs", json={"message": "why?", "run_id": "r1"})
        assert started.status_code == 202
    watch = subprocess.run(
        [sys.executable, "-m", "awaken_s3.cli", "runs", "watch", "r1", "--interval", "0.2"],
        cwd=ROOT,
        env={**os.environ, "AWAKEN_API_URL": server.url, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=HUNG,
    )
    assert watch.returncode == 0, watch.stderr
    committed = watch.stdout.split("committed turn", 1)[1]
    assert " ".join(ANSWER.split()) in " ".join(committed.split())
    assert "run r1 completed after 1 turn(s)" in watch.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "awaken_s3.cli", "runs", "watch", "nope"],
        cwd=ROOT,
        env={**os.environ, "AWAKEN_API_URL": server.url},
        capture_output=True,
        text=True,
        timeout=HUNG,
    )
    assert missing.returncode == 1
    assert "error: run nope: HTTP 404: run nope not found" in missing.stderr
