"""Following a run live over `awaken-s3 dev`'s WebSocket API with a real client (the
`websockets` package), as a chat UI would: the worker is SIGKILLed twice during the turn,
the client disconnects once and reconnects with the offset it has, and the text it
assembled by offset is the committed turn exactly; what it held at any moment was a prefix
of it (never taken back), no frame ever left a gap, a dropped connection cancelled nothing,
and a connection that went away without a goodbye was forgotten."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import boto3
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from awaken_s3.demo.model import ANSWER
from awaken_s3.service.frames import FollowedText
from awaken_s3.service.scoping import scoped_id
from tests.dev.conftest import HUNG, DevServer, alive, eventually

pytestmark = pytest.mark.slow

FAST = ("--scripted-delay", "0.05", "--lease-seconds", "4", "--sweep-interval", "0")


class Follower:
    """A WebSocket client following one run, assembling its text by offset."""

    def __init__(self, socket_url: str, run_id: str) -> None:
        self.url = socket_url
        self.run_id = run_id
        self.view = FollowedText()
        #: the text held after every frame that brought some
        self.seen: list[str] = []
        self.frames: list[dict[str, Any]] = []
        self.socket: ClientConnection | None = None

    async def follow(self) -> None:
        self.socket = await connect(self.url)
        message: dict[str, Any] = {"action": "follow", "run_id": self.run_id}
        turn, after = self.view.position()
        if turn is not None:
            message.update(turn=turn, after=after)
        await self.socket.send(json.dumps(message))

    async def close(self) -> None:
        assert self.socket is not None
        await self.socket.close()
        self.socket = None

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        import asyncio

        assert self.socket is not None
        async with asyncio.timeout(HUNG):
            while not condition():
                frame = json.loads(await self.socket.recv())
                self.frames.append(frame)
                if self.view.apply(frame):
                    self.seen.append(self.view.text)
        assert condition(), what

    @property
    def length(self) -> int:
        return len(self.view.text)


def dev_with_a_run(factory: Callable[..., DevServer]) -> tuple[DevServer, str]:
    """``awaken-s3 dev`` with run r1 streaming on thread t1, and its socket's URL."""
    server = factory(*FAST)
    with server.client() as http:
        assert http.post("/threads", json={"thread_id": "t1"}).status_code == 201
        assert http.post("/threads/t1/runs", json={"message": "a", "run_id": "r1"}).is_success
    return server, server.url.replace("http://", "ws://") + "/ws"


def kill_worker(http: httpx.Client, server: DevServer, run_id: str) -> int:
    killed = http.post(f"/dev/runs/{run_id}/kill")
    assert killed.status_code == 200, killed.text
    (pid,) = killed.json()["killed"]
    server.children.add(pid)
    eventually(lambda: not alive(pid), what=f"worker {pid} to die")
    return int(pid)


def committed_turn(http: httpx.Client, thread_id: str) -> str:
    messages = http.get(f"/threads/{thread_id}").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    return "".join(b["text"] for b in messages[1]["content"] if b["type"] == "text")


def connections_table(server: DevServer) -> Any:
    endpoint = re.search(r"moto on (\S+)", server.banner())
    assert endpoint
    db = boto3.client(
        "dynamodb",
        endpoint_url=endpoint.group(1),
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return db


async def test_a_followed_run_survives_two_kills_and_a_reconnect_without_gap_or_repeat(
    dev_server_factory: Callable[..., DevServer],
) -> None:
    server = dev_server_factory(*FAST)
    socket_url = server.url.replace("http://", "ws://") + "/ws"
    assert f"the WebSocket API on {socket_url}" in server.banner()
    db = connections_table(server)
    stored_run = scoped_id("dev-user", "r1")
    # A follower whose connection went away without a $disconnect: the worker's post gets
    # API Gateway's 410 and forgets it.
    db.put_item(
        TableName="awaken-dev-connections",
        Item={
            "pk": {"S": f"FOLLOW#{stored_run}"},
            "sk": {"S": "CONN#gone-conn="},
            "connection_id": {"S": "gone-conn="},
            "run_id": {"S": "r1"},
            "turn": {"N": "0"},
            "offset": {"N": "0"},
            "calls": {"N": "0"},
            "expires_at": {"N": "4102444800"},
        },
    )
    with server.client() as http:
        assert http.post("/threads", json={"thread_id": "t1"}).status_code == 201
        follower = Follower(socket_url, "r1")
        await follower.follow()  # before the run exists: an error frame, nothing recorded
        await follower.until(lambda: any(f["type"] == "error" for f in follower.frames), "404")
        assert follower.frames[-1]["code"] == "not_found"
        started = http.post("/threads/t1/runs", json={"message": "why?", "run_id": "r1"})
        assert started.status_code == 202, started.text
        await follower.close()
        await follower.follow()

        await follower.until(lambda: follower.length >= 120, "the first 120 characters")
        kill_worker(http, server, "r1")
        at_kill = follower.length
        await follower.until(lambda: follower.length >= at_kill + 100, "text after a resume")

        await follower.close()  # a dropped connection: it must cancel nothing
        dropped_at = follower.length
        await follower.follow()  # again, naming the turn and offset it has
        await follower.until(lambda: follower.length >= dropped_at + 60, "text after reconnect")
        kill_worker(http, server, "r1")
        await follower.until(lambda: follower.view.status is not None, "the run's end")
        await follower.close()

        committed = committed_turn(http, "t1")
        assert committed == ANSWER
        assert follower.view.status == "completed"
        # Exactly the committed turn: no gap, no character twice, nothing taken back.
        assert follower.view.last_turn_text == committed
        assert follower.view.gaps == []
        assert all(committed.startswith(text) for text in follower.seen)
        assert follower.view.plans == ["R1", "R1"]
        kinds = [f["type"] for f in follower.frames]
        assert kinds[-1] == "run_ended"
        # One turn committed, as one: a worker killed between its push and the record of how
        # far it pushed has its successor send the end of the turn again (the protocol lets a
        # frame repeat what the follower holds; the assembly above ignored the repeat).
        committed_frames = [f for f in follower.frames if f["type"] == "turn_committed"]
        assert {(f["turn"], f["text_length"]) for f in committed_frames} == {(0, len(committed))}
        # Text was pushed as it became durable: many frames, none carrying the whole turn.
        texts = [f for f in follower.frames if f["type"] == "text"]
        assert len(texts) > 20 and max(len(f["text"]) for f in texts) < len(committed) / 3

        run = http.get("/runs/r1").json()
        assert (run["status"], run["turn"]) == ("completed", 1)
        left = db.query(
            TableName="awaken-dev-connections",
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"FOLLOW#{stored_run}"}},
        )["Items"]
        assert left == [], "disconnected and gone followers are forgotten"


async def test_a_cancel_on_the_socket_stops_the_run_and_a_disconnect_does_not(
    dev_server_factory: Callable[..., DevServer],
) -> None:
    server, socket_url = dev_with_a_run(dev_server_factory)
    with server.client() as http:
        first = Follower(socket_url, "r1")
        await first.follow()
        await first.until(lambda: first.length >= 40, "some text")
        await first.close()  # gone mid-turn: the run streams on
        second = Follower(socket_url, "r1")
        await second.follow()
        await second.until(lambda: second.length >= first.length + 80, "text after it left")
        assert second.frames[0] == {"type": "following", "run_id": "r1", "turn": 0, "offset": 0}
        assert http.get("/runs/r1").json()["status"] == "running"

        assert second.socket is not None
        await second.socket.send(json.dumps({"action": "cancel", "run_id": "r1"}))
        await second.until(lambda: second.view.status is not None, "the run's end")
        assert second.view.status == "cancelled"
        assert {"type": "cancel", "run_id": "r1", "status": "cancelled"} in second.frames

        def stopped() -> bool:
            workers: list[Any] = http.get("/dev/runs/r1").json()["workers"]
            return not workers

        eventually(stopped, what="the worker to stop streaming")
        run = http.get("/runs/r1").json()
        assert (run["status"], run["turn"], run["partial"]) == ("cancelled", 0, None)
        # A cancelled turn commits nothing: the thread has the user's message only.
        messages = http.get("/threads/t1").json()["messages"]
        assert [m["role"] for m in messages] == ["user"]
        await second.socket.send(json.dumps({"action": "dance", "run_id": "r1"}))
        await second.until(lambda: second.frames[-1]["type"] == "error", "an error frame")
        assert second.frames[-1]["code"] == "unknown_action"
        # The worker alone told the follower of the end, after its last text: no text frame
        # came after run_ended (the cancel's answer and the error are the socket's own).
        kinds = [frame["type"] for frame in second.frames]
        after_end = kinds[kinds.index("run_ended") + 1 :]
        assert set(after_end) <= {"cancel", "error"}, after_end
        await second.close()


def test_runs_watch_follows_through_the_socket_and_through_a_kill(
    dev_server_factory: Callable[..., DevServer],
) -> None:
    import os
    import subprocess
    import sys
    import threading

    from tests.dev.conftest import ROOT

    server, socket_url = dev_with_a_run(dev_server_factory)
    with server.client() as http:
        env = {**os.environ, "AWAKEN_API_URL": server.url, "AWAKEN_SOCKET_URL": socket_url}
        watch = subprocess.Popen(
            [sys.executable, "-m", "awaken_s3.cli", "runs", "watch", "r1"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []
        assert watch.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(iter(watch.stdout.readline, "")))  # type: ignore[union-attr]
        reader.start()

        def shown() -> str:
            return "".join(
                json.loads(line[6:]) for line in list(lines) if line.startswith("text: ")
            )

        eventually(lambda: len(shown()) >= 100, what="the watcher to show 100 characters")
        kill_worker(http, server, "r1")
        try:
            assert watch.wait(timeout=HUNG) == 0, watch.stderr.read() if watch.stderr else ""
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.wait()
        reader.join()
        committed = committed_turn(http, "t1")
    assert "polling" not in (watch.stderr.read() if watch.stderr else "")
    assert shown() == committed
    assert "resumed with R1 (turn 0)\n" in lines
    assert lines[-3:] == [
        "status: completed\n",
        f"committed turn: {json.dumps(committed, ensure_ascii=False)}\n",
        "run r1 completed after 1 turn(s)\n",
    ]
