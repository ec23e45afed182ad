"""`awaken-s3 dev` serves its own origin only: a web page elsewhere in the developer's browser
must not drive it (a cross-site POST starting a run spends their API key; a sweep or a kill
acts on their stack), nor read it by DNS rebinding (a name the attacker controls, resolved to
127.0.0.1, gives the page a same-origin view of the server unless ``Host`` is checked). The
console, the CLI and other clients without ``Origin`` keep working; ``--require-token``
covers every route, the management API the workers post frames to included."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable
from typing import Any

import boto3
import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from awaken_s3.demo.model import ANSWER
from awaken_s3.service.frames import FollowedText
from tests.dev.conftest import HUNG, DevServer

pytestmark = pytest.mark.slow

FAST = ("--scripted-delay", "0.05", "--lease-seconds", "4", "--sweep-interval", "0")
EVIL = "http://evil.example"
#: what a browser adds to a request a page on another site makes
CROSS_SITE = {"Origin": EVIL, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}


def port_of(server: DevServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


def raw_handshake(port: int, host: str, *, origin: str | None = None) -> int:
    """The status a WebSocket handshake to ``/ws`` gets, sent byte by byte (a client library
    sets ``Host`` from the URL; a rebinding page's browser sets it from the attacker's
    name)."""
    lines = [
        "GET /ws HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
    ]
    if origin is not None:
        lines.append(f"Origin: {origin}")
    with socket.create_connection(("127.0.0.1", port), timeout=HUNG) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))
        status_line = sock.makefile("rb").readline().decode("ascii")
    return int(status_line.split()[1])


def refused_handshake(url: str, **kw: Any) -> int:
    with pytest.raises(InvalidStatus) as refused:
        connect(url, open_timeout=HUNG, **kw).close()
    return int(refused.value.response.status_code)


def frames_until(client: ClientConnection, done: Callable[[dict[str, Any]], bool]) -> list[Any]:
    frames: list[dict[str, Any]] = []
    while not frames or not done(frames[-1]):
        frames.append(json.loads(client.recv(timeout=HUNG)))
    return frames


def test_a_page_elsewhere_neither_drives_nor_rebinds_the_dev_server(
    dev_server_factory: Callable[..., DevServer],
) -> None:
    server = dev_server_factory(*FAST)
    port = port_of(server)
    own = f"http://127.0.0.1:{port}"
    ws_url = f"ws://127.0.0.1:{port}/ws"
    with server.client() as http:
        assert http.post("/threads", json={"thread_id": "t1"}).status_code == 201

        # DNS rebinding: evil.example resolved to 127.0.0.1, the page reads "its own" origin.
        for path in ("/dev/threads", "/threads/t1", "/dev/info", "/"):
            read = http.get(path, headers={"Host": f"evil.example:{port}"})
            assert read.status_code == 403, (path, read.text)
            assert "t1" not in read.text and "evil" not in read.text
        assert raw_handshake(port, f"evil.example:{port}") == 403
        assert (
            raw_handshake(port, f"evil.example:{port}", origin=f"http://evil.example:{port}") == 403
        )

        # A cross-site text/plain POST (no preflight) starting a run: refused, nothing started.
        started = http.post(
            "/threads/t1/runs",
            content=json.dumps({"message": "spend", "run_id": "evil-run"}),
            headers={**CROSS_SITE, "Content-Type": "text/plain;charset=UTF-8"},
        )
        assert started.status_code == 403
        assert "evil" not in started.text
        assert http.get("/runs/evil-run").status_code == 404
        assert http.get("/threads/t1").json()["messages"] == []
        assert (
            http.post("/threads", json={"thread_id": "t2"}, headers={"Origin": EVIL}).status_code
            == 403
        )
        assert (
            http.post("/threads", json={"thread_id": "t2"}, headers={"Origin": "null"}).status_code
            == 403
        )
        fetch_site_only = http.post(
            "/threads", json={"thread_id": "t2"}, headers={"Sec-Fetch-Site": "cross-site"}
        )
        assert fetch_site_only.status_code == 403
        assert http.get("/threads/t2").status_code == 404

        # The stack's own actions, from a page elsewhere: refused, and no sweep ran.
        assert http.post("/dev/sweep", headers=CROSS_SITE).status_code == 403
        assert http.post("/dev/runs/r1/kill", headers={"Origin": EVIL}).status_code == 403
        assert http.get("/dev/info").json()["sweeps"] == 0

        # The socket a page elsewhere would stream a run's text from.
        assert refused_handshake(ws_url, origin=Origin(EVIL)) == 403

        # Its own origin (the console, as 127.0.0.1 or localhost) and clients without one.
        swept = http.post("/dev/sweep", headers={"Origin": own, "Sec-Fetch-Site": "same-origin"})
        assert swept.status_code == 200, swept.text
        assert http.get("/dev/info").json()["sweeps"] == 1
        as_localhost = http.post(
            "/threads",
            json={"thread_id": "t3"},
            headers={"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
        )
        assert as_localhost.status_code == 201, as_localhost.text
        assert http.get("/", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200
        assert raw_handshake(port, f"127.0.0.1:{port}", origin=own) == 101
        for origin in (Origin(own), None):
            with connect(ws_url, origin=origin, open_timeout=HUNG) as client:
                client.send(json.dumps({"action": "follow", "run_id": "missing"}))
                (frame,) = frames_until(client, lambda f: f["type"] == "error")
                assert frame["code"] == "not_found"
    output = server.banner()
    assert "refused" in output and "evil" not in output


def connection_ids(server: DevServer) -> list[str]:
    endpoint = re.search(r"moto on (\S+)", server.banner())
    assert endpoint
    db = boto3.client(
        "dynamodb",
        endpoint_url=endpoint.group(1),
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    items = db.scan(TableName="awaken-dev-connections")["Items"]
    return sorted({item["connection_id"]["S"] for item in items if "connection_id" in item})


def test_require_token_covers_the_management_api_while_the_workers_still_push(
    dev_server_factory: Callable[..., DevServer],
) -> None:
    server = dev_server_factory("--require-token", *FAST)
    assert server.token
    port = port_of(server)
    ws_url = f"ws://127.0.0.1:{port}/ws?token={server.token}"
    with server.client() as http:
        assert http.post("/threads", json={"thread_id": "t1"}).status_code == 201
        started = http.post("/threads/t1/runs", json={"message": "why?", "run_id": "r1"})
        assert started.status_code == 202, started.text
        # The token does not make a page elsewhere welcome.
        assert refused_handshake(ws_url, origin=Origin(EVIL)) == 403
        with connect(ws_url, open_timeout=HUNG) as client:
            view = FollowedText()
            client.send(json.dumps({"action": "follow", "run_id": "r1"}))
            frames = frames_until(client, lambda f: f["type"] == "text")
            (connection,) = connection_ids(server)
            forged = json.dumps({"type": "forged"})
            with httpx.Client(base_url=server.url, timeout=HUNG) as anonymous:
                target = f"/@connections/{connection}"
                assert anonymous.post(target, content=forged).status_code == 401
                assert anonymous.get(target).status_code == 401
                assert anonymous.delete(target).status_code == 401
            with server.client(token="wrong") as wrong:
                assert wrong.post(f"/@connections/{connection}", content=forged).status_code == 401
            noted = http.post(f"/@connections/{connection}", content=json.dumps({"type": "note"}))
            assert noted.status_code == 200
            frames += frames_until(client, lambda f: f["type"] == "run_ended")
    kinds = [frame["type"] for frame in frames]
    assert "forged" not in kinds and kinds.count("note") == 1
    for frame in frames:
        view.apply(frame)
    # The workers' frames reached the follower: the management API takes theirs.
    assert view.status == "completed" and view.committed[0] == ANSWER
