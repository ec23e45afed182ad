"""Following a turn live: push over the WebSocket API vs polling the partial view.

Run: ``.venv/bin/python benchmarks/live_push.py`` (about a minute on 2 cores).

One 1,000-token turn (``--tokens`` text deltas of one token, about 4 characters each, paced
at ``--rate`` tokens/s like a model) goes through the real :class:`TurnRunner` with the
S3 checkpoint store on a local moto server, twice, side by side in this one run:

* ``push``: the run has a follower; the worker's :class:`RunPusher` (the one the deployed
  worker uses) checkpoints at the push cadence and posts each durable batch through the
  management API client (aiobotocore's ``apigatewaymanagementapi``, its endpoint a local
  aiohttp server standing in for API Gateway) to a real WebSocket client (``websockets``),
  which assembles the text by offset;
* ``poll``: nobody follows; the writer checkpoints at its default cadence (1 s) and a client
  polls the checkpoint every ``--poll`` seconds (what ``GET /runs/{id}/partial`` reads;
  ``awaken-s3 runs watch`` polls every 0.5 s).

Delay: for every delta, from the moment the model yielded it to the moment the follower
held its last character (both on this process's monotonic clock). Each S3 request and each
management-API call waits ``--s3-latency`` / ``--push-latency`` seconds before it is sent
(an aiobotocore ``before-send`` hook), modelling the network round trip. Printed: p50/p99
per mode and as ratios, and per turn the checkpoint PUTs, pushes (PostToConnection calls)
and pushed bytes, and the follower look-ups (DynamoDB queries). Then cancel-to-stop: a
streaming run is cancelled and the time until its worker returned is measured against the
lease renewal interval (``--lease``/3), ``--cancels`` times.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aioboto3
from aiohttp import web
from websockets.asyncio.client import connect

from awaken_s3.local.moto import MotoServer
from awaken_s3.messages import Message
from awaken_s3.service.connections import ConnectionStore
from awaken_s3.service.connections import table_definition as connection_table
from awaken_s3.service.frames import FollowedText, Position
from awaken_s3.service.push import FrameSender, RunPusher
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.streaming.events import StopEvent, StreamEvent, TextDelta, UsageEvent
from awaken_s3.streaming.outcome import TurnCompleted
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.streaming.turn_request import TurnRequest

BUCKET, CONNECTIONS = "live-push", "live-push-connections"
WORDS = ("the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog. ")
CONNECTION = "bench-connection="


@dataclass
class TimedModel:
    """Yields ``tokens`` one-token deltas at ``rate``/s, noting when each left the model."""

    tokens: int
    rate: float
    name: str = "timed"
    #: (offset just past the delta's last character, monotonic time it was yielded)
    sent: list[tuple[int, float]] = field(default_factory=list)

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=True)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[StreamEvent]:
        start, offset = time.monotonic(), 0
        for i in range(self.tokens):
            await asyncio.sleep(max(0.0, start + i / self.rate - time.monotonic()))
            word = WORDS[i % len(WORDS)]
            offset += len(word)
            self.sent.append((offset, time.monotonic()))
            yield TextDelta(word)
        yield UsageEvent(10, self.tokens)
        yield StopEvent("end_turn")


class Follower:
    """A WebSocket client: when did it hold each character?"""

    def __init__(self) -> None:
        self.view = FollowedText()
        self.held: list[tuple[int, float]] = []  # (length held, when)

    async def read(self, url: str, started: asyncio.Event) -> None:
        async with connect(url) as socket:
            started.set()
            async for raw in socket:
                frame = json.loads(raw)
                if self.view.apply(frame):
                    self.held.append((len(self.view.text), time.monotonic()))
                if frame["type"] == "turn_committed":
                    return


class Gateway:
    """API Gateway's two faces, locally: the follower's socket and the management API."""

    def __init__(self) -> None:
        self.socket: web.WebSocketResponse | None = None
        app = web.Application()
        app.router.add_get("/ws", self._ws)
        app.router.add_post("/@connections/{id}", self._post)
        self.runner = web.AppRunner(app, access_log=None)
        self.url = ""

    async def start(self) -> None:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        self.socket = web.WebSocketResponse()
        await self.socket.prepare(request)
        async for _ in self.socket:
            pass
        return self.socket

    async def _post(self, request: web.Request) -> web.Response:
        if self.socket is None or self.socket.closed:
            return web.json_response({}, status=410, headers={"x-amzn-ErrorType": "GoneException"})
        await self.socket.send_str((await request.read()).decode())
        return web.Response()


@contextlib.asynccontextmanager
async def client(
    service: str, endpoint: str, latency: float, counts: dict[str, int]
) -> AsyncIterator[Any]:
    session = aioboto3.Session()
    async with session.client(
        service,  # type: ignore[call-overload]
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
    ) as made:

        async def network_latency(**kwargs: Any) -> None:
            operation = kwargs.get("event_name", "").rsplit(".", 1)[-1]
            counts[operation] = counts.get(operation, 0) + 1
            await asyncio.sleep(latency)

        made.meta.events.register("before-send.*", network_latency)
        yield made


def delays(sent: list[tuple[int, float]], held: list[tuple[int, float]]) -> list[float]:
    """For each delta: when the follower first held its last character, minus when it left."""
    out, i = [], 0
    for offset, at in sent:
        while i < len(held) and held[i][0] < offset:
            i += 1
        if i == len(held):
            break
        out.append(held[i][1] - at)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def request() -> ModelRequest:
    return ModelRequest(model="timed", messages=(Message.user("Stream, please."),))


def turn(run_id: str) -> TurnRequest:
    return TurnRequest(
        run_id=run_id, thread_id="bench", turn=0, epoch=1, request=request(), existing=None
    )


async def push_mode(args: argparse.Namespace, moto: str, gateway: Gateway) -> dict[str, Any]:
    counts: dict[str, int] = {}
    async with (
        client("s3", moto, args.s3_latency, counts) as s3,
        client("dynamodb", moto, args.s3_latency, counts) as db,
        client("apigatewaymanagementapi", gateway.url, args.push_latency, counts) as manage,
    ):
        connections = ConnectionStore(CONNECTIONS, db)
        await connections.connect(CONNECTION, owner="bench")
        await connections.follow(CONNECTION, "run-push", Position(0), public_run_id="run-push")
        store = S3StreamCheckpointStore(BUCKET, prefix="push/", client=s3)
        sender = FrameSender(manage)
        pusher = RunPusher("run-push", connections=connections, sender=sender, threads=None)  # type: ignore[arg-type]
        model = TimedModel(args.tokens, args.rate)
        runner = TurnRunner(
            model, pusher.store(store), writer_id="push", writer_factory=pusher.writer_factory
        )
        follower, started = Follower(), asyncio.Event()
        reading = asyncio.create_task(
            follower.read(gateway.url.replace("http", "ws") + "/ws", started)
        )
        await started.wait()
        pusher.turn_started(0)  # the worker's loop knows its turn from the run it claimed
        async with pusher:
            await asyncio.sleep(args.discover_wait)  # the follower is found before the turn
            outcome = await pusher.runner(runner).run_turn(turn("run-push"))
            assert isinstance(outcome, TurnCompleted)
            pusher.turn_committed(_advanced(), outcome.message)
        await asyncio.wait_for(reading, 30)
        assert follower.view.last_turn_text == outcome.message.text
        return {
            "delays": delays(model.sent, follower.held),
            "puts": outcome.checkpoint_stats.puts,
            "pushes": sender.frames,
            "bytes": sender.bytes,
            "queries": counts.get("Query", 0),
            "chars": len(outcome.message.text),
        }


def _advanced() -> Any:
    from awaken_s3.threads.models import RunSettings, RunState

    return RunState("run-push", "bench", "bench", RunSettings(model="timed"), turn=1)


async def poll_mode(args: argparse.Namespace, moto: str) -> dict[str, Any]:
    counts: dict[str, int] = {}
    async with client("s3", moto, args.s3_latency, counts) as s3:
        store = S3StreamCheckpointStore(BUCKET, prefix="poll/", client=s3)
        model = TimedModel(args.tokens, args.rate)
        runner = TurnRunner(model, store, writer_id="poll")
        held: list[tuple[int, float]] = []
        done = asyncio.Event()

        async def poll() -> None:
            while not done.is_set():
                stored = await store.get("run-poll")
                length = len(stored.checkpoint.partial_text) if stored else 0
                if not held or length > held[-1][0]:
                    held.append((length, time.monotonic()))
                await asyncio.sleep(args.poll)

        polling = asyncio.create_task(poll())
        outcome = await runner.run_turn(turn("run-poll"))
        assert isinstance(outcome, TurnCompleted)
        done.set()
        await polling
        # The poller learns the end (and the last text) from the committed turn.
        return {
            "delays": delays(model.sent[:-1], held),
            "puts": outcome.checkpoint_stats.puts,
            "gets": counts.get("GetObject", 0),
        }


async def cancel_to_stop(args: argparse.Namespace, moto: str) -> list[float]:
    """Seconds from a cancel to the worker's loop returning, for a streaming run."""
    from awaken_s3.runtime.loop import RunEnd, RunLoop
    from awaken_s3.threads import DynamoThreadStore
    from awaken_s3.threads.dynamo import create_table
    from awaken_s3.threads.models import RunSettings

    out = []
    async with client("s3", moto, 0.0, {}) as s3, client("dynamodb", moto, 0.0, {}) as db:
        await create_table(db, "live-push-threads")
        threads = DynamoThreadStore("live-push-threads", client=db, s3_client=s3, bucket=BUCKET)
        store = S3StreamCheckpointStore(BUCKET, prefix="cancel/", client=s3)
        for i in range(args.cancels):
            run_id, thread_id = f"cancel-{i}", f"thread-{i}"
            await threads.create_thread(thread_id, owner="bench")
            await threads.create_run(
                run_id,
                thread_id=thread_id,
                owner="bench",
                settings=RunSettings(model="timed"),
                messages=[Message.user("go")],
            )
            model = TimedModel(100_000, args.rate)
            loop = RunLoop(
                threads,
                TurnRunner(model, store, writer_id="cancel"),
                store,
                worker_id="cancel",
                lease_seconds=args.lease,
            )
            task = asyncio.create_task(loop.run(run_id))
            # Cancels land anywhere within a renewal interval.
            await asyncio.sleep(1.0 + (i / max(1, args.cancels)) * args.lease / 3)
            at = time.monotonic()
            await threads.cancel_run(run_id)
            result = await task
            out.append(time.monotonic() - at)
            assert result.end == RunEnd.CANCELLED, result
    return out


async def main(args: argparse.Namespace) -> None:
    with MotoServer.start() as server:
        async with (
            client("s3", server.endpoint_url, 0.0, {}) as s3,
            client("dynamodb", server.endpoint_url, 0.0, {}) as db,
        ):
            await s3.create_bucket(Bucket=BUCKET)
            await db.create_table(TableName=CONNECTIONS, **connection_table())
        gateway = Gateway()
        await gateway.start()
        try:
            push, poll = await asyncio.gather(
                push_mode(args, server.endpoint_url, gateway), poll_mode(args, server.endpoint_url)
            )
            cancels = await cancel_to_stop(args, server.endpoint_url)
        finally:
            await gateway.runner.cleanup()
    report(args, server.endpoint_url, push, poll, cancels)


def report(
    args: argparse.Namespace,
    moto: str,
    push: dict[str, Any],
    poll: dict[str, Any],
    cancels: list[float],
) -> None:
    print(
        f"live_push: one {args.tokens}-token turn ({push['chars']} characters) at "
        f"{args.rate:g} tokens/s per mode, both at once; moto {moto}; "
        f"+{args.s3_latency * 1000:.0f} ms per S3/DynamoDB request, "
        f"+{args.push_latency * 1000:.0f} ms per PostToConnection; polling every {args.poll:g} s; "
        f"Python {platform.python_version()}, {platform.machine()}"
    )
    print(f"{'delay (model -> follower)':<28} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    rows = {"push (WebSocket)": push["delays"], "poll (partial view)": poll["delays"]}
    for name, values in rows.items():
        print(
            f"{name:<28} {percentile(values, 0.5) * 1000:>8.0f} "
            f"{percentile(values, 0.99) * 1000:>8.0f} {statistics.mean(values) * 1000:>8.0f}"
        )
    p50 = percentile(poll["delays"], 0.5) / percentile(push["delays"], 0.5)
    p99 = percentile(poll["delays"], 0.99) / percentile(push["delays"], 0.99)
    print(f"polling / push: p50 x{p50:.1f}, p99 x{p99:.1f}")
    print(
        f"per {args.tokens}-token turn: push {push['pushes']} PostToConnection "
        f"({push['bytes']} bytes, {push['bytes'] / max(1, push['pushes']):.0f} per push), "
        f"{push['puts']} checkpoint PUTs, {push['queries']} follower queries; "
        f"polling: {poll['puts']} checkpoint PUTs, {poll['gets']} GETs"
    )
    renewal = args.lease / 3
    print(
        f"cancel to stop ({len(cancels)} runs, renewal every {renewal:g} s): "
        f"max {max(cancels):.2f} s, mean {statistics.mean(cancels):.2f} s "
        f"(max / renewal interval {max(cancels) / renewal:.2f})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=80.0, help="tokens per second")
    parser.add_argument("--s3-latency", type=float, default=0.03, help="seconds per request")
    parser.add_argument("--push-latency", type=float, default=0.02, help="seconds per push")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between polls")
    parser.add_argument("--lease", type=float, default=6.0, help="lease seconds (cancel part)")
    parser.add_argument("--cancels", type=int, default=5)
    parser.add_argument("--discover-wait", type=float, default=0.8)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smallest size (seconds): shows the script runs, its figures mean nothing",
    )
    parsed = parser.parse_args()
    if parsed.quick:
        # Two seconds of stream: the poller needs a put at the 1 s cadence to see any text.
        parsed.tokens, parsed.rate, parsed.cancels, parsed.lease = 200, 100.0, 1, 1.5
    asyncio.run(main(parsed))
