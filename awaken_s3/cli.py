"""The ``awaken-s3`` command line.

``demo`` runs the local end-to-end story, ``dev`` the local stack (awaken_s3.dev), ``init``
writes a new project (awaken_s3.project), ``runs watch`` follows a run through the HTTP API.
``checkpoints show|list|clean`` are operators' tools against real or local AWS: the variables
they read are listed in their help (:data:`CHECKPOINTS_ENVIRONMENT`). A failure to reach AWS is
one line naming the endpoint, bucket or table and the setting to change, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.ids import InvalidIdError, validate_run_id
from awaken_s3.models import StoredCheckpoint
from awaken_s3.settings import SettingsError, StorageSettings
from awaken_s3.streaming.recovery import plan_recovery

if TYPE_CHECKING:
    # aioboto3 loads on first use: `awaken-s3 --help` and `demo` need not pay for it here.
    from awaken_s3.service.diagnose import Target
    from awaken_s3.service.wiring import Services
    from awaken_s3.stores.s3 import S3StreamCheckpointStore

CHECKPOINTS_ENVIRONMENT = """\
environment:
  AWAKEN_BUCKET               the bucket holding the checkpoints (every action)
  AWAKEN_TABLE                the thread table (list and clean; show does not need it)
  AWAKEN_CHECKPOINT_PREFIX    the checkpoints' key prefix (default checkpoints/)
  AWAKEN_SWEEP_GRACE_SECONDS  read with the table's settings (default: derived from
                              AWAKEN_LEASE_SECONDS and AWAKEN_VISIBILITY_MARGIN_SECONDS,
                              30 with their defaults)
  AWS_ENDPOINT_URL            another endpoint than AWS (moto, `awaken-s3 dev`); also
                              AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL_DYNAMODB per service
  AWS_DEFAULT_REGION          the region (or AWS_REGION, or the profile's region)
  AWS_PROFILE                 the credentials' profile, or AWS_ACCESS_KEY_ID,
                              AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="awaken-s3",
        description="Streaming LLM turns that survive the death of the process running them.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="kill a worker mid-stream and resume the turn in a new process")
    from awaken_s3.dev.cli import add_parser as add_dev_parser

    add_dev_parser(sub)
    from awaken_s3.project.cli import add_parser as add_init_parser

    add_init_parser(sub)
    _add_runs_parser(sub)
    _add_checkpoints_parser(sub)
    return parser


def _add_runs_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``runs watch``: follow a run through the API."""
    runs = sub.add_parser("runs", help="follow runs through the HTTP API")
    runs_sub = runs.add_subparsers(dest="action", required=True)
    watch = runs_sub.add_parser(
        "watch",
        help="follow a run live: its partial text and state, then the committed turn",
        description="Follows the run through the WebSocket API at AWAKEN_SOCKET_URL when it is "
        "set, else polls GET /runs/{id}/partial of the HTTP API at AWAKEN_API_URL (the URLs "
        "`awaken-s3 dev` prints, or a deployed stack's), with the bearer token in "
        "AWAKEN_API_TOKEN when the API needs one. Exits 0 when the run completed.",
    )
    watch.add_argument("run_id", help="the run id, as the API's caller knows it")
    watch.add_argument("--api", default=None, help="the API's base URL (default: AWAKEN_API_URL)")
    watch.add_argument("--interval", type=float, default=0.5, help="seconds between polls")
    watch.add_argument(
        "--socket",
        default=None,
        help="follow through the WebSocket API at this ws:// or wss:// URL instead of polling "
        "(default: AWAKEN_SOCKET_URL; polling when neither is set or the socket cannot be opened)",
    )


def _add_checkpoints_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``checkpoints show|list|clean``, each with the environment it reads in its help."""
    documented: dict[str, object] = {
        "epilog": CHECKPOINTS_ENVIRONMENT,
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }
    ckpt = sub.add_parser(
        "checkpoints",
        help="inspect, list and clean stream checkpoints (AWAKEN_BUCKET, AWAKEN_TABLE, ...)",
        description="Inspect, list and clean stream checkpoints in S3, judged against the "
        "runs in DynamoDB.",
        **documented,  # type: ignore[arg-type]
    )
    ckpt_sub = ckpt.add_subparsers(dest="action", required=True)
    show = ckpt_sub.add_parser(
        "show",
        help="a run's checkpoint and the recovery plan it implies",
        description="A run's checkpoint and the recovery plan it implies (reads S3 only: "
        "without --owner it lists the checkpoint prefix to find the run).",
        **documented,  # type: ignore[arg-type]
    )
    show.add_argument(
        "run_id",
        help="the run id as its caller knows it (the API's run_id), or as stored (as "
        "`checkpoints list` prints it)",
    )
    show.add_argument(
        "--owner",
        metavar="SUB",
        help="the caller's JWT subject: finds its run without listing the bucket, and picks "
        "it when callers share the run id",
    )
    show.add_argument("--json", action="store_true", help="machine-readable output")
    ckpt_sub.add_parser(
        "list",
        help="every checkpoint, with its run's state and a verdict",
        description="Every checkpoint, with its run's state and a verdict (live or stale).",
        **documented,  # type: ignore[arg-type]
    )
    clean = ckpt_sub.add_parser(
        "clean",
        help="delete stale checkpoints (committed turn, ended or missing run, corrupt)",
        description="Delete stale checkpoints, each conditionally on the version judged.",
        **documented,  # type: ignore[arg-type]
    )
    clean.add_argument(
        "--older-than",
        type=float,
        metavar="HOURS",
        help="also delete checkpoints of live runs untouched for this many hours",
    )
    clean.add_argument("--dry-run", action="store_true", help="say what would go, delete nothing")


def _describe(stored: StoredCheckpoint, where: str) -> list[str]:
    cp = stored.checkpoint
    plan = plan_recovery(cp)
    lines = [
        f"run {cp.run_id}  ({where}, version {stored.version})",
        f"  thread {cp.thread_id}, model {cp.model}, turn {cp.turn}, epoch {cp.epoch}, "
        f"writer {cp.writer or '-'}",
        f"  retry_count {cp.retry_count}, suspended {'yes' if cp.suspended else 'no'}, "
        f"updated {cp.updated_at.isoformat(timespec='seconds')}",
        f"  text: {len(cp.partial_text)} chars"
        + (f", ending ...{cp.partial_text[-60:]!r}" if cp.partial_text else ""),
    ]
    for call in cp.tool_calls:
        lines.append(
            f"  tool call #{call.index} {call.name or '?'} ({call.id or 'no id'}): "
            f"{'closed' if call.closed else 'open'}, {len(call.arguments)} chars of arguments"
        )
    if cp.reusable_blocks:
        kinds = ", ".join(
            b.block.get("type", "?") if b.type == "provider_block" else b.type
            for b in cp.reusable_blocks
        )
        lines.append(f"  complete blocks carried by a resume: {kinds}")
    lines.append(f"  recovery plan: {plan.kind}")
    for dropped in plan.dropped:
        lines.append(f"    drops #{dropped.index} {dropped.name or '?'}: {dropped.reason}")
    return lines


async def _stored_ids(store: S3StreamCheckpointStore, run_id: str) -> list[str]:
    """The stored ids ``run_id`` may name: itself, if a checkpoint is stored under it, and
    every caller's run of that id (``<owner tag>-<run_id>``)."""
    from awaken_s3.service.scoping import TAG_LENGTH

    found = []
    async for stored in store.list_run_ids():
        tag, dash, rest = stored.partition("-")
        scoped = len(tag) == TAG_LENGTH and dash and all(c in "0123456789abcdef" for c in tag)
        if stored == run_id or (scoped and rest == run_id):
            found.append(stored)
    return found


async def _resolve(store: S3StreamCheckpointStore, run_id: str, owner: str | None) -> str | None:
    """The stored id to show, or None after saying why there is none to pick."""
    from awaken_s3.service.scoping import scoped_id

    if owner is not None:
        return scoped_id(owner, run_id)
    found = await _stored_ids(store, run_id)
    if len(found) == 1:
        return found[0]
    if not found:
        print(f"no checkpoint for run {run_id}", file=sys.stderr)
    else:
        print(
            f"{len(found)} checkpoints answer to run {run_id}: {', '.join(sorted(found))}; "
            "name one as stored, or give the caller with --owner SUB",
            file=sys.stderr,
        )
    return None


async def _show(
    store: S3StreamCheckpointStore, run_id: str, as_json: bool, owner: str | None = None
) -> int:
    from awaken_s3.streaming.cleanup import read_checkpoint
    from awaken_s3.streaming.fate import Absent, Corrupt, NewerSchema, Unreadable

    resolved = await _resolve(store, run_id, owner)
    if resolved is None:
        return 1
    run_id = resolved
    stored = await read_checkpoint(store, run_id)
    match stored:
        case Unreadable(error=error):
            raise error  # explained like any other failure to reach AWS
        case Corrupt(detail=detail):
            print(f"corrupt checkpoint: {detail}", file=sys.stderr)
            return 1
        case NewerSchema(schema_version=schema):
            print(f"written by a newer awaken-s3 (schema_version {schema})", file=sys.stderr)
            return 1
        case Absent():
            print(f"no checkpoint for run {run_id}", file=sys.stderr)
            return 1
    where = f"s3://{store.bucket}/{store.key_at(run_id, stored.version)}"
    if as_json:
        plan = plan_recovery(stored.checkpoint)
        document = {
            "location": where,
            "version": stored.version,
            "checkpoint": stored.checkpoint.model_dump(mode="json"),
            "plan": plan.kind,
            "dropped_tool_calls": [d.id for d in plan.dropped],
        }
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print("\n".join(_describe(stored, where)))
    return 0


async def _list(stores: Services) -> int:
    from awaken_s3.maintenance import survey

    count = 0
    async for verdict in survey(stores.checkpoints, stores.threads, now=datetime.now(UTC)):
        count += 1
        turn = verdict.checkpoint.turn if verdict.checkpoint else "?"
        run = (
            f"run {verdict.run.status.value} at turn {verdict.run.turn}"
            if verdict.run
            else "no run"
        )
        if verdict.newer_schema is not None:
            judged = f"newer schema_version {verdict.newer_schema}: left alone"
        else:
            judged = f"stale: {verdict.stale}" if verdict.stale else "live"
        print(f"{verdict.run_id}  turn {turn}  {run}  {judged}")
    print(f"{count} checkpoint(s)", file=sys.stderr)
    return 0


async def _clean(stores: Services, older_than: float | None, dry_run: bool) -> int:
    from awaken_s3.maintenance import clean

    max_age = timedelta(hours=older_than) if older_than is not None else None
    results = await clean(
        stores.checkpoints,
        stores.threads,
        now=datetime.now(UTC),
        max_age=max_age,
        dry_run=dry_run,
    )
    for item in results:
        print(f"{item.verdict.run_id}  {item.action}  ({item.verdict.stale})")
    deleted = sum(r.action == "deleted" for r in results)
    newer = sum(r.verdict.newer_schema is not None for r in results)
    if dry_run:
        would = sum(r.action == "would delete" for r in results)
        summary = f"{would} would be deleted (dry run: nothing was deleted)"
    else:
        summary = f"{deleted} deleted"
    if newer:
        summary += f", {newer} left alone (written by a newer build)"
    print(summary, file=sys.stderr)
    return 0


async def _checkpoints(args: argparse.Namespace, settings: StorageSettings, target: Target) -> int:
    from awaken_s3.service.wiring import open_services, shared_session
    from awaken_s3.stores.s3 import S3StreamCheckpointStore

    if args.action == "show":
        async with shared_session().client("s3") as s3:
            target.s3_endpoint = s3.meta.endpoint_url
            store = S3StreamCheckpointStore(
                settings.bucket, prefix=settings.checkpoint_prefix, client=s3
            )
            return await _show(store, args.run_id, args.json, args.owner)
    async with open_services(settings) as stores:
        target.s3_endpoint = stores.s3.meta.endpoint_url
        target.dynamodb_endpoint = stores.dynamodb.meta.endpoint_url
        if args.action == "list":
            return await _list(stores)
        return await _clean(stores, args.older_than, args.dry_run)


def _runs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import os

    try:
        import rich  # noqa: F401

        from awaken_s3.dev.watch import Api, WatchError, watch_run
    except ModuleNotFoundError as exc:
        parser.error(
            f"runs watch needs the 'local' extra ({exc.name} is missing): "
            "pip install 'awaken-s3[local]'"
        )
    base = args.api or os.environ.get("AWAKEN_API_URL")
    if not base:
        parser.error("set AWAKEN_API_URL (or --api) to the HTTP API's URL")
    if args.interval <= 0:
        parser.error("--interval must be a positive number of seconds")
    try:
        api = Api(base, os.environ.get("AWAKEN_API_TOKEN") or None)
        socket_url = args.socket or os.environ.get("AWAKEN_SOCKET_URL")
        if socket_url:
            from awaken_s3.dev.watch_socket import follow

            followed = follow(api, socket_url, args.run_id, out=sys.stdout)
            if followed is not None:
                return followed
            print(f"runs watch: cannot open {socket_url}; polling", file=sys.stderr)
        return watch_run(api, args.run_id, interval=args.interval)
    except WatchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        try:
            from awaken_s3.demo.scenario import run_demo
        except ModuleNotFoundError as exc:
            parser.error(
                f"the demo needs the 'demo' extra ({exc.name} is missing): "
                "pip install 'awaken-s3[demo]'"
            )
        return run_demo()
    if args.command == "runs":
        return _runs(parser, args)
    if args.command == "init":
        from awaken_s3.project.cli import run as run_init

        return run_init(args)
    if args.command == "dev":
        try:
            import moto  # noqa: F401  (the embedded server; checked before anything starts)

            from awaken_s3.dev.cli import run as run_dev
        except ModuleNotFoundError as exc:
            parser.error(
                f"the dev server needs the 'local' extra ({exc.name} is missing): "
                "pip install 'awaken-s3[local]'"
            )
        return run_dev(args)
    return _run_checkpoints(parser, args)


def _run_checkpoints(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import os

    from awaken_s3.service.diagnose import Target, bad_endpoint_setting, explain

    try:
        settings = StorageSettings.from_env(need_table=args.action != "show")
        if args.action == "show":
            validate_run_id(args.run_id)
            if args.owner is not None:
                from awaken_s3.service.scoping import validate_public_run_id

                validate_public_run_id(args.run_id)
        if getattr(args, "older_than", None) is not None and args.older_than <= 0:
            raise SettingsError("--older-than must be a positive number of hours")
        problem = bad_endpoint_setting(os.environ)
        if problem is not None:
            raise SettingsError(problem)
    except (SettingsError, InvalidIdError) as exc:
        parser.error(str(exc))
    from botocore.exceptions import BotoCoreError, ClientError

    from awaken_s3.threads.errors import ThreadStoreError

    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    target = Target(
        region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        s3_endpoint=os.environ.get("AWS_ENDPOINT_URL_S3") or endpoint,
        dynamodb_endpoint=os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") or endpoint,
        bucket=settings.bucket,
        table=settings.table or None,
    )
    try:
        return asyncio.run(_checkpoints(args, settings, target))
    except (StreamCheckpointError, ThreadStoreError, ClientError, BotoCoreError) as exc:
        print(f"error: {explain(exc, target)}", file=sys.stderr)
        return 1
    except ValueError as exc:
        # botocore's own check of an endpoint from a profile's config file.
        if not str(exc).startswith("Invalid endpoint"):
            raise
        print(f"error: {explain(exc, target)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
