"""Billed AWS requests and DynamoDB units per typical run, and the resume path.

Run: ``.venv/bin/python benchmarks/requests_per_run.py`` (about 25 s on 2 cores).
Against another checkout (the "before" column): ``PYTHONPATH=/path/to/checkout`` in front.

The typical run: the HTTP API creates a thread and a run (a 1.5 KB system prompt, one tool),
the worker handler drives it in one invocation: model turn 1 streams text for 20 s and ends
with one tool call, the tool runs, model turn 2 streams text for 10 s and completes. Every
request the handlers' AWS clients send is counted through botocore event hooks on the shared
aioboto3 session (``before-send``: one count per HTTP attempt, which is what AWS bills),
against a moto server on 127.0.0.1. The event source mapping's own ReceiveMessage and
DeleteMessage (one each per record, billed too) are added as a fixed line.

The stack is the deployed one, WebSocket API included (``AWAKEN_CONNECTIONS_TABLE`` set, as
template.yaml sets it): the worker looks for the run's followers with a strongly consistent
``Query`` every 0.5 s while it drives the run, whether anyone follows or not; nobody follows
here, so no push is sent. Those queries are counted, and printed on a line of their own.

Time is scaled, not waited: the lease (60 s, renewed every 20 s), the checkpoint interval
(1 s), the follower look-up interval (0.5 s) and the streaming time (30 s) are all divided by
``--scale`` (5), which keeps every count what it is at full scale (puts per second of
streaming, renewals per lease period, look-ups per second) while the run takes 6 s. Not
much more: the worker waits the look-up interval after the last look-up returned, and the
query's own time on the server does not scale, so at ``--scale 20`` (a 25 ms interval beside
a query of a few milliseconds) the look-ups come out a sixth too few. The checkpoint byte
threshold (4096 characters) is not reached by either turn at any scale.

DynamoDB units are estimated from the items each request reads or writes (DynamoDB's item
size rules; a write bills the larger of the old and new item per 1 KB, a transactional
write twice that, a strongly consistent read per 4 KB), with item sizes tracked from the
requests and responses. Prices are us-east-1 list prices (on-demand DynamoDB, S3 Standard,
SQS FIFO), next to the model's token cost for the same run (Claude Sonnet 4.5 on Bedrock).

The resume path: a second run is cut at its deadline mid-turn (a checkpoint is left), then
a second invocation in the same process resumes it; printed are the requests from handler
entry to the continuation's first token, in order, and the time that took.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3

from awaken_s3.dev.apigw import HttpRequest, http_api_event, jwt_claims, route_for
from awaken_s3.local.lambda_context import LocalLambdaContext
from awaken_s3.local.moto import MotoServer

if TYPE_CHECKING:
    from awaken_s3.agents import App

SUB = "bench-user"
MODEL = "scripted-1"
SYSTEM = ("You are a careful assistant for a logistics company. " * 28)[:1500]
PRICES = {
    # $ per request (DynamoDB: per unit)
    "dynamodb_write_unit": 0.625 / 1e6,
    "dynamodb_read_unit": 0.125 / 1e6,
    "s3_put": 0.005 / 1e3,
    "s3_get": 0.0004 / 1e3,
    "sqs_fifo": 0.50 / 1e6,
    # Claude Sonnet 4.5 on Bedrock, $ per token
    "input_token": 3.0 / 1e6,
    "output_token": 15.0 / 1e6,
}
# A typical run's tokens: two turns over a 2k-token context, 30 s at ~50 tokens/s.
INPUT_TOKENS, OUTPUT_TOKENS = 2 * 2000, 1500
S3_PUT_CLASS = {"PutObject", "ListObjectsV2", "CopyObject", "PostObject"}


def attr_size(value: Mapping[str, Any]) -> int:
    """Bytes of one DynamoDB attribute value, by DynamoDB's item-size rules (approximate
    for numbers: about one byte per two digits plus one)."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        return len(str(inner).strip("-").replace(".", "")) // 2 + 2
    if kind == "BOOL" or kind == "NULL":
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + attr_size(v) for k, v in inner.items())
    if kind == "L":
        return 3 + sum(1 + attr_size(v) for v in inner)
    return len(json.dumps(inner))


def item_size(item: Mapping[str, Any]) -> int:
    return sum(len(name.encode()) + attr_size(value) for name, value in item.items())


def key_of(item: Mapping[str, Any]) -> tuple[str, str]:
    return (str(item["pk"]["S"]), str(item["sk"]["S"]))


@dataclass
class Counts:
    requests: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0
    sizes: dict[tuple[str, str], int] = field(default_factory=dict)
    #: operations in order, while ``trace`` is on
    trace: list[str] | None = None
    #: DynamoDB requests on the WebSocket API's connection table (the follower look-ups)
    on_connections: Counter[str] = field(default_factory=Counter)
    connections_table: str = ""
    _params: dict[int, dict[str, Any]] = field(default_factory=dict)

    def on_send(self, event_name: str, **_: Any) -> None:
        service, operation = event_name.split(".")[1:3]
        self.requests[f"{service}.{operation}"] += 1
        if self.trace is not None:
            self.trace.append(f"{service}.{operation}")

    def on_params(self, params: dict[str, Any], event_name: str, **kw: Any) -> None:
        self._params[id(kw.get("context"))] = dict(params)

    def on_after(self, event_name: str, parsed: dict[str, Any], **kw: Any) -> None:
        operation = event_name.split(".")[2]
        params = self._params.pop(id(kw.get("context")), {})
        if self.connections_table and params.get("TableName") == self.connections_table:
            self.on_connections[operation] += 1
        self.units(operation, params, parsed)

    def _write(self, key: tuple[str, str], new: int | None, factor: int = 1) -> None:
        old = self.sizes.get(key, 0)
        size = max(old, new or 0)
        if new is not None:
            self.sizes[key] = new
        self.write_units += factor * max(1, math.ceil(size / 1024))

    def units(self, operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> None:
        if operation == "GetItem":
            item = parsed.get("Item")
            size = item_size(item) if item else 0
            if item:
                self.sizes[key_of(item)] = size
            self.read_units += max(1, math.ceil(size / 4096))
        elif operation == "Query":
            total = 0
            for item in parsed.get("Items", []):
                total += item_size(item)
                if "sk" in item:
                    self.sizes[key_of(item)] = item_size(item)
            self.read_units += max(1, math.ceil(total / 4096))
        elif operation == "PutItem":
            item = params["Item"]
            self._write(key_of(item), item_size(item))
        elif operation == "UpdateItem":
            new = parsed.get("Attributes")
            self._write(key_of(params["Key"]), item_size(new) if new else None)
        elif operation == "TransactWriteItems":
            for entry in params["TransactItems"]:
                ((kind, body),) = entry.items()
                if kind == "Put":
                    self._write(key_of(body["Item"]), item_size(body["Item"]), factor=2)
                else:
                    self._write(key_of(body["Key"]), None, factor=2)

    def dollars(self) -> dict[str, float]:
        s3_put = sum(n for op, n in self.requests.items() if op.split(".")[1] in S3_PUT_CLASS)
        s3_get = sum(
            n
            for op, n in self.requests.items()
            if op.startswith("s3.") and op.split(".")[1] in {"GetObject", "HeadObject"}
        )
        sqs = sum(n for op, n in self.requests.items() if op.startswith("sqs.")) + 2
        return {
            "DynamoDB": self.write_units * PRICES["dynamodb_write_unit"]
            + self.read_units * PRICES["dynamodb_read_unit"],
            "S3": s3_put * PRICES["s3_put"] + s3_get * PRICES["s3_get"],
            "SQS": sqs * PRICES["sqs_fifo"],
        }


class Env:
    def __init__(self, server: MotoServer, scale: float) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.bucket = self.table = f"bench-{suffix}"
        self.connections = f"bench-connections-{suffix}"
        os.environ["AWS_ENDPOINT_URL"] = server.endpoint_url
        for name, value in {
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }.items():
            os.environ.setdefault(name, value)
        boto3.client("s3").create_bucket(Bucket=self.bucket)
        self.sqs = boto3.client("sqs")
        self.queue_url = self.sqs.create_queue(
            QueueName=f"runs-{suffix}.fifo", Attributes={"FifoQueue": "true"}
        )["QueueUrl"]
        from awaken_s3.service.connections import table_definition
        from awaken_s3.threads import create_table

        async def make_tables() -> None:
            import aioboto3

            async with aioboto3.Session().client("dynamodb") as db:
                await create_table(db, self.table)
                await db.create_table(TableName=self.connections, **table_definition())

        asyncio.run(make_tables())
        os.environ.update(
            {
                "AWAKEN_BUCKET": self.bucket,
                "AWAKEN_TABLE": self.table,
                "AWAKEN_QUEUE_URL": self.queue_url,
                # The WebSocket API's table, as template.yaml gives the worker: with it the
                # worker looks for followers of every run it drives. Its management API client
                # is built but never called (nobody follows); moto's endpoint stands in.
                "AWAKEN_CONNECTIONS_TABLE": self.connections,
                "AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI": server.endpoint_url,
                "AWAKEN_PROVIDER": "anthropic",
                "AWAKEN_MODEL": MODEL,
                "AWAKEN_LEASE_SECONDS": str(60 / scale),
                "AWAKEN_VISIBILITY_MARGIN_SECONDS": str(10 / scale),
                "AWAKEN_DEADLINE_MARGIN_SECONDS": "0.2",
                "POWERTOOLS_METRICS_NAMESPACE": "bench",
                "POWERTOOLS_LOG_LEVEL": "ERROR",
                "POWERTOOLS_METRICS_DISABLED": "true",
            }
        )

    def api(
        self, app: App, method: str, path: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        from awaken_s3.service import http

        found = route_for(method, path)
        assert found is not None
        route, parameters = found
        data = json.dumps(body).encode() if body is not None else b""
        request = HttpRequest(method, path, (("content-type", "application/json"),), data)
        claims = jwt_claims(SUB, issuer="https://issuer", audience="bench", now=time.time())
        event = http_api_event(request, route, parameters, claims=claims)
        answer = http.handler_for(app)(event, context(30))
        assert int(answer["statusCode"]) < 300, answer
        result: dict[str, Any] = json.loads(answer["body"])
        return result

    def deliver(self, handler: Any, seconds: float) -> None:
        """What the event source mapping does: receive, invoke, delete the acknowledged."""
        from awaken_s3.local.sqs_events import lambda_event, queue_records

        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=1,
            MessageSystemAttributeNames=["All"],
            VisibilityTimeout=30,
        )["Messages"]
        arn = f"arn:aws:sqs:us-east-1:123456789012:{self.queue_url.rsplit('/', 1)[-1]}"
        event = lambda_event(queue_records(messages, queue_arn=arn, region="us-east-1"))
        # The worker runs in another container than the API: nothing the API read is cached.
        from awaken_s3.threads import dynamo

        prompts = getattr(dynamo, "_SYSTEM_PROMPTS", None)
        if prompts is not None:
            prompts.clear()
        answer = handler(event, context(seconds))
        assert answer == {"batchItemFailures": []}, answer
        for message in messages:
            self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])


def context(seconds: float) -> Any:
    return LocalLambdaContext(
        aws_request_id=str(uuid.uuid4()),
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:bench",
        deadline_ms=int((time.time() + seconds) * 1000),
        function_name="bench",
        log_stream_name="bench",
    )


def paced_text(seconds: float, scale: float) -> list[Any]:
    from awaken_s3.streaming.scripted import text_deltas

    # 20 deltas per scaled second: the count only sets the CPU the benchmark spends.
    return text_deltas("lorem " * int(20 * seconds), chunk=6)


def scale_checkpoints(scale: float) -> None:
    from awaken_s3.streaming import runner
    from awaken_s3.streaming.coalescer import CheckpointPolicy

    def policy() -> CheckpointPolicy:
        return CheckpointPolicy(min_interval=1.0 / scale)

    runner.CheckpointPolicy = policy  # type: ignore[attr-defined,assignment]


def bench_app() -> App:
    """The app both handlers serve: one agent with the run's tool, whose system prompt and
    tools a caller may set (the API refuses a tool the agent does not have)."""
    from awaken_s3.agents import Agent, App
    from awaken_s3.runtime.tools import Tool

    lookup = Tool(
        "lookup",
        "look an order up",
        {"type": "object", "properties": {"order": {"type": "string"}}},
        lambda order: f"order {order}: shipped",
    )
    return App([Agent("default", tools=[lookup], overridable={"system", "tools"})])


#: the worker's own ``run_pusher``, before :func:`scale_follower_checks` wrapped it
_BUILT_PUSHER: list[Any] = []


def scale_follower_checks(scale: float) -> None:
    """The worker's follower look-ups at ``scale`` times their rate (1: the deployed rate)."""
    from awaken_s3.service import push

    if not _BUILT_PUSHER:
        _BUILT_PUSHER.append(push.run_pusher)
    built = _BUILT_PUSHER[0]

    def scaled(services: Any, run_id: str) -> Any:
        pusher = built(services, run_id)
        if pusher is not None:
            pusher.discover_every = push.DISCOVER_EVERY / scale
        return pusher

    push.run_pusher = scaled


def typical_run(env: Env, counts: Counts, scale: float) -> Counts:
    from awaken_s3.service.worker import make_handler
    from awaken_s3.streaming.scripted import ScriptedProvider, finish, tool_call

    app = bench_app()
    model = ScriptedProvider(
        [
            [
                *paced_text(20, scale),
                *tool_call(0, "lookup", {"order": "A-17"}, call_id="call-1"),
                *finish("tool_use"),
            ],
            [*paced_text(10, scale), *finish()],
        ],
        delay=1.0 / (20 * scale),
        paced=True,
    )
    handler = make_handler(app=app, provider_factory=lambda: model)
    thread = env.api(app, "POST", "/threads", {})
    env.api(
        app,
        "POST",
        f"/threads/{thread['thread_id']}/runs",
        {"message": "Where is order A-17?", "system": SYSTEM, "tools": ["lookup"]},
    )
    env.deliver(handler, 900)
    return counts


def resume_path(env: Env, counts: Counts) -> tuple[float, list[str], list[str]]:
    """Cut a run at its deadline mid-turn, then resume it in a second (warm) invocation."""
    from awaken_s3.service.worker import make_handler
    from awaken_s3.streaming.scripted import Hook, ScriptedProvider, Stall, finish, text_deltas

    first_token: list[float] = []
    model = ScriptedProvider(
        [
            [*text_deltas("The saved partial text of the turn. "), Stall()],
            [
                Hook(lambda: first_token.append(time.perf_counter())),
                *text_deltas("More."),
                *finish(),
            ],
        ]
    )
    app = bench_app()
    handler = make_handler(app=app, provider_factory=lambda: model)
    thread = env.api(app, "POST", "/threads", {})
    body = {"message": "Go on", "system": SYSTEM, "tools": []}
    env.api(app, "POST", f"/threads/{thread['thread_id']}/runs", body)
    env.deliver(handler, 0.7)  # suspended at its deadline, checkpoint kept
    counts.trace = []
    entered: list[float] = []

    def timed(event: dict[str, Any], ctx: Any) -> dict[str, Any]:
        entered.append(time.perf_counter())
        result: dict[str, Any] = handler(event, ctx)
        return result

    env.deliver(timed, 900)
    path = counts.trace
    # Requests sent before the first token: the model is called after the resume's put.
    cut = path.index("s3.PutObject") + 1 if "s3.PutObject" in path else len(path)
    counts.trace = None
    return (first_token[0] - entered[0]) * 1000, path[:cut], path[cut:]


def install_hooks(counts: Counts) -> None:
    from awaken_s3.service.wiring import shared_session

    events = shared_session().events
    events.register("before-send", counts.on_send)
    events.register("before-parameter-build.dynamodb", counts.on_params)
    events.register("after-call.dynamodb", counts.on_after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=5.0)
    parser.add_argument("--resumes", type=int, default=5)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smallest size (seconds): shows the script runs, its resume time means nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.scale, args.resumes = 20.0, 1
    import awaken_s3

    with MotoServer.start() as server:
        env = Env(server, args.scale)
        scale_checkpoints(args.scale)
        scale_follower_checks(args.scale)
        counts = Counts(connections_table=env.connections)
        install_hooks(counts)
        typical_run(env, counts, args.scale)
        per_run = Counts(
            requests=Counter(counts.requests), on_connections=Counter(counts.on_connections)
        )
        per_run.read_units, per_run.write_units = counts.read_units, counts.write_units
        report(per_run, awaken_s3.__file__)
        counts.requests.clear()
        # The resume path is timed, not scaled: the look-ups at their deployed interval.
        scale_follower_checks(1.0)
        resumes = [resume_path(env, counts) for _ in range(args.resumes)]
    resumed_ms = statistics.median(ms for ms, _, _ in resumes)
    _, before_token, after_token = resumes[-1]
    print(
        f"\nresume: handler entry to the continuation's first token: median {resumed_ms:.1f} ms "
        f"of {len(resumes)} warm invocations (loopback moto, no added latency)"
    )
    print("  requests before the first token: " + ", ".join(before_token))
    print(f"  requests after it, to the end of the invocation: {len(after_token)}")


def report(counts: Counts, source: str) -> None:
    total = sum(counts.requests.values())
    print(
        f"requests_per_run: {source} (python {platform.python_version()}); "
        "typical run = 2 model turns, 1 tool call, 30 s of streaming"
    )
    for op, n in sorted(counts.requests.items()):
        print(f"  {op:36} {n:4d}")
    print(f"  {'(event source: Receive + Delete)':36} {2:4d}")
    looks = counts.on_connections["Query"]
    print(
        f"  (of the dynamodb.Query: {looks} follower look-ups on the connection table, "
        "nobody following)"
    )
    rest = total + 2 - looks
    print(
        f"billed requests per run: {total + 2} ({rest} without the follower look-ups; "
        f"with them {(total + 2) / rest:.2f}x)"
    )
    print(
        f"DynamoDB units per run (estimated): {counts.write_units:.0f} write, "
        f"{counts.read_units:.0f} read"
    )
    dollars = counts.dollars()
    aws = sum(dollars.values())
    tokens = INPUT_TOKENS * PRICES["input_token"] + OUTPUT_TOKENS * PRICES["output_token"]
    parts = ", ".join(f"{name} {1000 * value:.4f}" for name, value in dollars.items())
    print(
        f"$ per 1,000 runs: AWS requests {1000 * aws:.4f} ({parts}); "
        f"model tokens {1000 * tokens:.2f}"
    )


if __name__ == "__main__":
    main()
