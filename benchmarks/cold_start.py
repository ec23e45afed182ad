"""Cold start and warm setup of the Lambda handlers.

Run: ``.venv/bin/python benchmarks/cold_start.py`` (about 30 s on 2 cores).
Against another checkout (the "before" column): ``PYTHONPATH=/path/to/checkout`` in front.
In a built artifact: ``--artifact DIR`` imports from DIR alone (``python -I``), as Lambda does.

1. **Import CPU** of each handler module (``handlers.worker``, ``handlers.api``,
   ``handlers.sweeper``): ``time.process_time()`` around the import in a fresh interpreter,
   median of ``--runs`` (5) processes, the modules interleaved round by round, as a ratio to
   ``import boto3`` measured the same way in the same run.
2. **Warm setup CPU**: what an invocation after the first spends before its clients are
   ready (an event loop, the DynamoDB, S3 and SQS clients, the stores), median of 50, as a
   ratio to one GetItem round trip (wall time) on a moto server on 127.0.0.1. Before the
   warm runner this was ``asyncio.run`` + opening and closing the three clients; with it, the
   process's runner hands out its open clients.
3. **First-invocation setup CPU** (the same, once, in a fresh process, with the imports the
   clients need: the AWS SDK and the stores): the work the warm runner moves from every
   invocation to the first one, and what lazy imports move there from the handler's import.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

MODULES = ("boto3", "handlers.worker", "handlers.api", "handlers.sweeper")
_IMPORT = (
    "import sys, time\n"
    "{path}"
    "t = time.process_time()\n"
    "import {module}\n"
    "print(time.process_time() - t)\n"
)


def import_cpu(module: str, artifact: str | None, root: str) -> float:
    path = f"sys.path.insert(0, {artifact!r})\n" if artifact else ""
    # In an artifact: the interpreter without this venv's packages, and nothing but DIR.
    python = getattr(sys, "_base_executable", sys.executable) if artifact else sys.executable
    cmd = [python, *(["-I"] if artifact else []), "-c"]
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        [*cmd, _IMPORT.format(path=path, module=module)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        # The checkout measured: ``python -c`` puts the working directory first on the path.
        cwd=artifact or root,
    )
    return float(out.stdout.strip().splitlines()[-1])


def measure_imports(runs: int, artifact: str | None, root: str) -> dict[str, float]:
    samples: dict[str, list[float]] = {m: [] for m in MODULES}
    # Warm the OS file cache once, so the first round is not a disk benchmark.
    for module in MODULES:
        import_cpu(module, artifact, root)
    for _ in range(runs):
        for module in MODULES:
            samples[module].append(import_cpu(module, artifact, root))
    return {m: statistics.median(v) for m, v in samples.items()}


def _setup_probe() -> Callable[[], Any]:
    """One warm invocation's client setup, for whichever wiring this checkout has."""
    from awaken_s3.service import wiring
    from awaken_s3.settings import StorageSettings

    storage = StorageSettings.from_env(need_queue=True)
    runtime = getattr(wiring, "warm_runtime", None)
    if runtime is not None:

        def warm() -> Any:
            rt = runtime()
            return rt.run(rt.services(storage))

        return warm

    def per_invocation() -> Any:
        async def go() -> None:
            async with wiring.open_services(storage):
                pass

        asyncio.run(go())

    return per_invocation


def setup_child() -> None:
    """Runs in a fresh process: first and warm setup CPU, and one GetItem round trip."""
    # The first invocation's figure includes the imports the clients need, wherever a
    # checkout does them (at the wiring's import, or on first use).
    start = time.process_time()
    probe = _setup_probe()
    probe()
    first = time.process_time() - start
    warm = []
    for _ in range(50):
        start = time.process_time()
        probe()
        warm.append(time.process_time() - start)

    async def round_trips() -> list[float]:
        import aioboto3

        async with aioboto3.Session().client("dynamodb") as db:
            key = {"pk": {"S": "RUN#x"}, "sk": {"S": "RUN"}}
            table = os.environ["AWAKEN_TABLE"]
            await db.get_item(TableName=table, Key=key, ConsistentRead=True)
            times = []
            for _ in range(50):
                start = time.perf_counter()
                await db.get_item(TableName=table, Key=key, ConsistentRead=True)
                times.append(time.perf_counter() - start)
            return times

    trip = statistics.median(asyncio.run(round_trips()))
    print(json.dumps({"first": first, "warm": statistics.median(warm), "get_item": trip}))


def measure_setup() -> dict[str, float]:
    import uuid

    import boto3

    from awaken_s3.local.moto import MotoServer

    with MotoServer.start() as server:
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": server.endpoint_url,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
        os.environ.update({k: env[k] for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID")})
        os.environ.update({k: env[k] for k in ("AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")})
        name = f"cold-{uuid.uuid4().hex[:8]}"
        boto3.client("dynamodb").create_table(
            TableName=name,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        env.update(
            {
                "AWAKEN_BUCKET": name,
                "AWAKEN_TABLE": name,
                "AWAKEN_QUEUE_URL": f"{server.endpoint_url}/123456789012/{name}.fifo",
            }
        )
        out = subprocess.run(
            [sys.executable, __file__, "--setup-child"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--artifact", help="import from this directory alone (python -I)")
    parser.add_argument("--setup-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-setup", action="store_true", help="import figures only")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one process per module (seconds): shows the script runs, its figures mean nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    if args.setup_child:
        setup_child()
        return
    import awaken_s3

    root = os.path.dirname(os.path.dirname(os.path.abspath(awaken_s3.__file__)))
    where = args.artifact or root
    print(f"cold_start: {where}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    imports = measure_imports(args.runs, args.artifact, root)
    base = imports["boto3"]
    print(f"import CPU, median of {args.runs} fresh processes (ratio to import boto3):")
    for module, cpu in imports.items():
        print(f"  {module:18} {1000 * cpu:7.1f} ms   {cpu / base:5.2f}x")
    if args.no_setup or args.artifact:
        return
    setup = measure_setup()
    trip = setup["get_item"]
    print(f"one GetItem round trip on moto (wall, median of 50): {1000 * trip:.2f} ms")
    print(
        f"  warm invocation setup CPU (median of 50): {1000 * setup['warm']:.3f} ms"
        f"   {setup['warm'] / trip:.3f}x one round trip"
    )
    print(
        f"  first invocation setup CPU (imports incl.): {1000 * setup['first']:.1f} ms"
        f"   {setup['first'] / trip:.2f}x one round trip"
    )


if __name__ == "__main__":
    main()
