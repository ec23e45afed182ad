"""``awaken-s3 dev``: its options, its banner, and waiting for Ctrl-C."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TextIO

from awaken_s3 import cli_args
from awaken_s3.dev.server import DEFAULT_PORT, DEFAULT_SUB, DevError, DevOptions, DevStack

PROVIDERS = ("bedrock", "anthropic", "openai")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = sub.add_parser(
        "dev",
        help="run the service locally: the HTTP API, workers, sweeper and a web console",
        description=(
            "Serve the HTTP API (handlers/api.py) on 127.0.0.1, drive runs with the real worker "
            "(handlers/worker.py) in local containers fed by an SQS event source, run the "
            "sweeper on a timer, and serve a web console at /. Storage is an embedded moto "
            "server unless --aws. Ctrl-C stops everything."
        ),
    )
    _app_options(dev)
    _stack_options(dev)


def _app_options(dev: argparse.ArgumentParser) -> None:
    dev.add_argument(
        "--app",
        metavar="MODULE:ATTRIBUTE",
        help="the awaken_s3.App to serve, imported from the current directory or the "
        "environment's path (default: [tool.awaken-s3] app in ./pyproject.toml, else the dev "
        "app: a scripted agent with a lookup tool)",
    )
    dev.add_argument(
        "--reload",
        action="store_true",
        help="re-import the app and restart the workers when its files change (a run in "
        "flight resumes from its checkpoint)",
    )
    dev.add_argument(
        "--port", type=cli_args.port, default=DEFAULT_PORT, help="port on 127.0.0.1 (0: any)"
    )
    dev.add_argument(
        "--require-token",
        action="store_true",
        help="refuse requests without 'Authorization: Bearer <token>' (AWAKEN_DEV_TOKEN, or a "
        "random one printed at start)",
    )
    dev.add_argument(
        "--provider",
        choices=PROVIDERS,
        help="a real model provider instead of the scripted model, configured by the same "
        "settings as the Lambda (AWAKEN_MODEL, AWAKEN_API_KEY_PARAM, ...)",
    )
    dev.add_argument(
        "--scripted-delay",
        type=cli_args.seconds_or_zero,
        default=0.08,
        help="seconds between the scripted model's 4-character deltas",
    )


def _stack_options(dev: argparse.ArgumentParser) -> None:
    dev.add_argument(
        "--aws",
        action="store_true",
        help="use the endpoint and credentials botocore finds (AWS_ENDPOINT_URL, a profile) "
        "instead of an embedded moto server",
    )
    dev.add_argument(
        "--name", default="awaken-dev", help="bucket and table name, queue name prefix"
    )
    dev.add_argument("--sub", default=DEFAULT_SUB, help="the dev identity (the JWT sub claim)")
    dev.add_argument(
        "--workers", type=cli_args.positive_int, default=2, help="worker containers at most"
    )
    dev.add_argument(
        "--lease-seconds",
        type=cli_args.positive_seconds,
        default=6.0,
        help="run lease (AWAKEN_LEASE_SECONDS): a killed worker's run resumes about then",
    )
    dev.add_argument(
        "--sweep-interval",
        type=cli_args.seconds_or_zero,
        default=60.0,
        help="seconds between sweeps (0: none)",
    )


def project_app(directory: Path | None = None) -> str | None:
    """The app a project names in its ``pyproject.toml`` (``[tool.awaken-s3] app``), if any."""
    import tomllib

    path = (directory or Path.cwd()) / "pyproject.toml"
    try:
        with path.open("rb") as file:
            data = tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    value = data.get("tool", {}).get("awaken-s3", {}).get("app")
    return value if isinstance(value, str) and value else None


def options_from(args: argparse.Namespace) -> DevOptions:
    token = None
    if args.require_token:
        from awaken_s3.dev.server import new_token

        token = os.environ.get("AWAKEN_DEV_TOKEN") or new_token()
    return DevOptions(
        port=args.port,
        token=token,
        provider=args.provider,
        external_aws=args.aws,
        name=args.name,
        sub=args.sub,
        workers=args.workers,
        lease_seconds=args.lease_seconds,
        sweep_interval=args.sweep_interval,
        scripted_delay=args.scripted_delay,
        app=args.app or project_app(),
        reload=args.reload,
    )


def banner(stack: DevStack) -> str:
    options = stack.options
    console = stack.url + "/" + (f"#token={options.token}" if options.token else "")
    model = (
        "the scripted model (it calls the tools a run offers, then gives one paragraph)"
        if options.provider is None
        else f"provider {options.provider}, model {os.environ.get('AWAKEN_MODEL')}"
    )
    agents = ", ".join(stack.app.names) if stack.app is not None else "?"
    if stack.moto is not None:
        storage = f"moto on {stack.endpoint_url} (pid {stack.moto.pid})"
    else:
        storage = f"AWS as botocore finds it (region {stack.region})"
    assert stack.stack is not None
    lines = [
        f"awaken-s3 dev: the HTTP API on {stack.url}",
        f"  console      {console}",
        f"  sockets      the WebSocket API on {stack.socket_url} (follow a run live; "
        + ("?token=<token>)" if options.token else "no token needed)"),
        f"  identity     sub={options.sub} (the JWT claims of every request)",
    ]
    if options.token:
        lines.append(f"  token        Authorization: Bearer {options.token}")
    lines += [
        f"  app          {stack.app_ref}: agents {agents}"
        + (" (reloaded when its files change)" if options.reload else ""),
        f"  model        {model}",
        f"  storage      {storage}",
        f"               bucket {stack.stack.names.bucket}, table {stack.stack.names.table}, "
        f"queue {stack.stack.names.queue} (+ {stack.stack.names.dead_letter_queue})",
        f"  workers      up to {options.workers} containers running handlers/worker.py, "
        f"lease {options.lease_seconds:g} s; logs in {stack.log_dir}",
        "  sweeper      "
        + (f"every {options.sweep_interval:g} s" if options.sweep_interval > 0 else "off"),
        "",
        "In another shell, for `awaken-s3 checkpoints ...` and `awaken-s3 runs watch RUN_ID`:",
    ]
    exports = dict(stack.exports)
    exports["AWAKEN_API_URL"] = stack.url
    exports["AWAKEN_SOCKET_URL"] = stack.socket_url
    if options.token:
        exports["AWAKEN_API_TOKEN"] = options.token
    lines += [f"  export {name}={shlex.quote(value)}" for name, value in exports.items()]
    lines += ["", "Ctrl-C stops everything this command started."]
    return "\n".join(lines)


def run(args: argparse.Namespace, *, out: TextIO = sys.stdout) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[signal.Signals, Callable[[int, FrameType | None], object] | int | None] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, on_signal)
    stack = DevStack(options_from(args))
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            stack.start()
        except DevError as exc:
            print(f"awaken-s3 dev: {exc}", file=sys.stderr)
            return 2
        except (BotoCoreError, ClientError) as exc:
            where = stack.endpoint_url or "AWS"
            print(f"awaken-s3 dev: creating the stack on {where} failed: {exc}", file=sys.stderr)
            return 1
        print(banner(stack), file=out, flush=True)
        while not stop.wait(1.0):
            pass
        print("\nawaken-s3 dev: stopping", file=out, flush=True)
        return 0
    finally:
        stack.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
