"""Cancel to stop: how long a worker goes on reading tokens after a cancel was accepted.

Run: ``.venv/bin/python benchmarks/cancel_stop.py`` (about three minutes: the renewal alone
takes up to 20 s per cancel on the template's lease).

Streaming runs (one-token deltas at ``--rate`` tokens/s, like a model) are driven by the real
run loop and turn runner on DynamoDB and S3 (a local moto server), with the template's
defaults: the lease (``AWAKEN_LEASE_SECONDS`` in template.yaml, renewed every third of it)
and the checkpoint writer's put interval (1 s; and 0.1 s, the cadence of a run someone follows
over the WebSocket API, as ``followed``). Each run is cancelled
through the service's own cancel code: half through the HTTP route's (``POST
/runs/{id}/cancel``), half through the WebSocket ``cancel`` action's (the socket routes, with
a connection record and a local stand-in for the management API), at points spread over one
renewal interval, one run at a time. Measured per cancel, from the request to the route
(so the route's own time counts: the cancel's write and the mark) to the last token the
worker read from the model: seconds and tokens.

Both mechanisms, side by side in this one run: ``mark`` (the cancel marks the run's
checkpoint, so the worker's next conditional put is refused and its lease check stops the
turn) and ``renewal`` (``AWAKEN_CANCEL_SIGNAL=false``: the worker learns of the cancel at its
next lease renewal only, as before the mark). Printed: per mechanism and path, mean and max
seconds and tokens, and the ratios renewal / mark.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from awaken_s3.local.moto import MotoServer
from awaken_s3.messages import Message
from awaken_s3.runtime.loop import RunEnd, RunLoop
from awaken_s3.service.connections import table_definition as connection_table
from awaken_s3.service.scoping import scoped_id
from awaken_s3.service.socket import SocketRoutes, cancel_and_tell
from awaken_s3.service.wiring import Services, open_services
from awaken_s3.settings import DEFAULT_LEASE_SECONDS, StorageSettings
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.events import StopEvent, StreamEvent, TextDelta, UsageEvent
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads.dynamo import create_table
from awaken_s3.threads.models import RunSettings

OWNER = "bench"
BUCKET, TABLE, CONNECTIONS = "cancel-stop", "cancel-stop-threads", "cancel-stop-connections"
TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"


def template_lease() -> float:
    """The lease the template deploys (its Globals' ``AWAKEN_LEASE_SECONDS``)."""
    found = re.search(r'AWAKEN_LEASE_SECONDS:\s*"?([0-9.]+)"?', TEMPLATE.read_text())
    return float(found.group(1)) if found else DEFAULT_LEASE_SECONDS


@dataclass
class CountingModel:
    """One-token deltas at ``rate``/s until closed, noting when each was read."""

    rate: float
    name: str = "counting"
    read: list[float] = field(default_factory=list)

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=True)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[StreamEvent]:
        start = time.monotonic()
        for i in range(1_000_000):
            await asyncio.sleep(max(0.0, start + i / self.rate - time.monotonic()))
            self.read.append(time.monotonic())
            yield TextDelta("tok ")
        yield UsageEvent(1, 1)
        yield StopEvent("end_turn")


@dataclass(frozen=True)
class Stop:
    #: from the cancel request to the last token the worker read, and those tokens
    seconds: float
    tokens: int
    #: the route's own time, request to answer
    answered: float


class Management:
    """PostToConnection's stand-in: accepts every frame (the cancel's answer)."""

    def __init__(self) -> None:
        app = web.Application()
        app.router.add_post("/@connections/{id}", self._post)
        self.runner = web.AppRunner(app, access_log=None)
        self.url = ""

    async def start(self) -> None:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def _post(self, request: web.Request) -> web.Response:
        await request.read()
        return web.Response()


async def one_cancel(
    services: Services, args: argparse.Namespace, path: str, at: float, put_every: float
) -> Stop:
    public = f"{path}-{uuid.uuid4().hex[:8]}"
    run_id, thread_id = scoped_id(OWNER, public), scoped_id(OWNER, f"t-{public}")
    await services.threads.create_thread(thread_id, owner=OWNER)
    await services.threads.create_run(
        run_id,
        thread_id=thread_id,
        owner=OWNER,
        settings=RunSettings(model="counting"),
        messages=[Message.user("go on")],
    )
    model = CountingModel(args.rate)
    runner = TurnRunner(
        model,
        services.checkpoints,
        writer_id=f"worker-{public}",
        checkpoint_policy=CheckpointPolicy(min_interval=put_every),
    )
    loop = RunLoop(
        services.threads,
        runner,
        services.checkpoints,
        worker_id=f"worker-{public}",
        lease_seconds=args.lease,
    )
    worker = asyncio.create_task(loop.run(run_id))
    routes = SocketRoutes(services, f"c-{public}=")
    await routes.connections.connect(f"c-{public}=", owner=OWNER)
    await asyncio.sleep(at)
    # From the request on: the route's own work (the cancel's write, the mark) is part of
    # what the caller waits for.
    asked = time.monotonic()
    if path == "http":
        await cancel_and_tell(services, owner=OWNER, public=public)
    else:
        await routes.cancel(json.dumps({"action": "cancel", "run_id": public}))
    answered = time.monotonic() - asked
    result = await worker
    assert result.end == RunEnd.CANCELLED, result
    after = [t for t in model.read if t > asked]
    return Stop(max(0.0, (after[-1] if after else asked) - asked), len(after), answered)


async def mechanism(
    services: Services, args: argparse.Namespace, signal: bool, put_every: float
) -> dict[str, list[Stop]]:
    """Every path's cancels with the mark on or off, spread over a renewal interval: one run
    at a time (``--concurrent``: all at once), so the one local moto server answers each
    request about as fast as S3 would, not behind a queue of other runs' puts."""
    os.environ["AWAKEN_CANCEL_SIGNAL"] = "true" if signal else "false"
    renewal = args.lease / 3
    points = [1.0 + (renewal - 1.0) * i / args.cancels for i in range(args.cancels)]
    out: dict[str, list[Stop]] = {}
    for path in ("http", "websocket"):
        jobs = [one_cancel(services, args, path, at, put_every) for at in points]
        if args.concurrent:
            out[path] = list(await asyncio.gather(*jobs))
        else:
            out[path] = [await job for job in jobs]
    return out


@contextlib.asynccontextmanager
async def stack(moto: str, management: str) -> AsyncIterator[Services]:
    os.environ.update(
        AWS_ENDPOINT_URL=moto,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWAKEN_BUCKET=BUCKET,
        AWAKEN_TABLE=TABLE,
        AWAKEN_CONNECTIONS_TABLE=CONNECTIONS,
        AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI=management,
    )
    async with open_services(StorageSettings.from_env(need_queue=False)) as services:
        await services.s3.create_bucket(Bucket=BUCKET)
        await create_table(services.dynamodb, TABLE)
        await services.dynamodb.create_table(TableName=CONNECTIONS, **connection_table())
        yield services


async def main(args: argparse.Namespace) -> None:
    management = Management()
    await management.start()
    try:
        with MotoServer.start() as server:
            async with stack(server.endpoint_url, management.url) as services:
                results = {}
                for label, put_every in (("unfollowed", 1.0), ("followed", 0.1)):
                    if label == "followed" and not args.followed:
                        continue
                    for signal in (True, False):
                        name = f"{'mark' if signal else 'renewal'}, {label}"
                        results[name] = await mechanism(services, args, signal, put_every)
    finally:
        await management.runner.cleanup()
    report(args, results)


def summary(stops: list[Stop]) -> tuple[float, float, float, int, float]:
    seconds = [s.seconds for s in stops]
    tokens = [s.tokens for s in stops]
    answered = statistics.mean(s.answered for s in stops)
    return statistics.mean(seconds), max(seconds), statistics.mean(tokens), max(tokens), answered


def report(args: argparse.Namespace, results: dict[str, dict[str, list[Stop]]]) -> None:
    print(
        f"cancel_stop: lease {args.lease:g} s (renewal every {args.lease / 3:g} s), "
        f"{args.rate:g} tokens/s, {args.cancels} cancels per path spread over one renewal "
        f"interval; moto; Python {platform.python_version()}, {platform.machine()}"
    )
    print(
        f"{'mechanism, run':<22} {'path':<10} {'mean s':>7} {'max s':>7} {'mean tok':>9} "
        f"{'max tok':>8} {'answer ms':>10}"
    )
    for name, paths in results.items():
        for path, stops in paths.items():
            mean_s, max_s, mean_t, max_t, answered = summary(stops)
            print(
                f"{name:<22} {path:<10} {mean_s:>7.2f} {max_s:>7.2f} {mean_t:>9.1f} "
                f"{max_t:>8d} {answered * 1000:>10.0f}"
            )
    for label in ("unfollowed", "followed"):
        mark, renewal = results.get(f"mark, {label}"), results.get(f"renewal, {label}")
        if mark is None or renewal is None:
            continue
        for path in mark:
            m, r = summary(mark[path]), summary(renewal[path])
            print(
                f"renewal / mark, {label}, {path}: seconds mean x{r[0] / max(m[0], 1e-3):.0f} "
                f"max x{r[1] / max(m[1], 1e-3):.0f}; tokens mean x{r[2] / max(m[2], 1):.0f} "
                f"max x{r[3] / max(m[3], 1):.0f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lease", type=float, default=template_lease(), help="lease seconds")
    parser.add_argument("--rate", type=float, default=80.0, help="tokens per second")
    parser.add_argument("--cancels", type=int, default=3, help="per path and mechanism")
    parser.add_argument(
        "--concurrent", action="store_true", help="all of a mechanism's runs at once"
    )
    parser.add_argument(
        "--followed",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure a followed run (its checkpoint puts 0.1 s apart)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smallest size (a 6 s lease, one cancel per path, unfollowed): that it runs",
    )
    parsed = parser.parse_args()
    if parsed.quick:
        parsed.lease, parsed.cancels, parsed.followed = 6.0, 1, False
    asyncio.run(main(parsed))
