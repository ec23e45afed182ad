"""What the console reads of the table beyond the API: the dev identity's threads, and a
run's internals (lease, checkpoint fencing fields, tool-call claims).

A run's internals come through the project's stores (the thread store's ``get_run``,
``list_tool_calls``, the checkpoint store's ``get``). The thread list
has no store operation (the Lambda API never lists a caller's threads): it is a table scan,
fine for a local table, its filter built by boto3's condition builder.
"""

from __future__ import annotations

import time
from typing import Any

from boto3.dynamodb.conditions import Attr, ConditionExpressionBuilder
from boto3.dynamodb.types import TypeSerializer

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.service.scoping import public_id, scoped_id
from awaken_s3.service.wiring import Services
from awaken_s3.threads import codec
from awaken_s3.threads.errors import RunNotFound
from awaken_s3.threads.models import RunState


def _scan_filter(owner: str) -> dict[str, Any]:
    condition = Attr("owner").eq(owner) & Attr("sk").is_in([codec.THREAD_SK, codec.RUN_SK])
    built = ConditionExpressionBuilder().build_expression(condition)
    serialize = TypeSerializer().serialize
    return {
        "FilterExpression": built.condition_expression,
        "ExpressionAttributeNames": built.attribute_name_placeholders,
        "ExpressionAttributeValues": {
            name: serialize(value) for name, value in built.attribute_value_placeholders.items()
        },
    }


async def threads(services: Services, owner: str) -> list[dict[str, Any]]:
    """``owner``'s threads, newest first, each with its runs, newest first."""
    found: dict[str, dict[str, Any]] = {}
    runs: list[RunState] = []
    paginator = services.dynamodb.get_paginator("scan")
    async for page in paginator.paginate(TableName=services.settings.table, **_scan_filter(owner)):
        for item in page.get("Items", ()):
            if item["sk"]["S"] == codec.THREAD_SK:
                thread = codec.decode_thread(item)
                found[thread.thread_id] = {
                    "thread_id": public_id(owner, thread.thread_id),
                    "message_count": thread.message_count,
                    "created_at": thread.created_at,
                    "runs": [],
                }
            else:
                runs.append(codec.decode_run(item))
    for run in sorted(runs, key=lambda r: r.created_at, reverse=True):
        if run.thread_id in found:
            found[run.thread_id]["runs"].append(
                {
                    "run_id": public_id(owner, run.run_id),
                    "status": run.status.value,
                    "turn": run.turn,
                    "created_at": run.created_at,
                }
            )
    return sorted(found.values(), key=lambda t: t["created_at"], reverse=True)


async def _checkpoint(services: Services, run_id: str) -> dict[str, Any] | None:
    try:
        stored = await services.checkpoints.get(run_id)
    except StreamCheckpointError:
        return None
    if stored is None:
        return None
    cp = stored.checkpoint
    return {
        "version": stored.version.strip('"'),
        "epoch": cp.epoch,
        "writer": cp.writer,
        "turn": cp.turn,
        "resumed_with": cp.resumed_with,
        "retry_count": cp.retry_count,
        "text_length": len(cp.partial_text),
        "tool_calls": [call.model_dump() for call in cp.tool_calls],
        "updated_at": cp.updated_at.isoformat(),
    }


async def _tool_claims(services: Services, run: RunState) -> list[dict[str, Any]]:
    """The claims of every tool call of the run (a streaming turn's calls have none yet)."""
    return [
        {
            "id": record.tool_use_id,
            "name": record.name,
            "status": record.status.value,
            "epoch": record.epoch,
            "attempts": record.attempts,
            "is_error": record.is_error,
        }
        for record in await services.threads.list_tool_calls(run.run_id)
    ]


async def run_internals(
    services: Services, owner: str, public_run_id: str
) -> dict[str, Any] | None:
    """``owner``'s run as the console shows it (None: no such run of theirs); the caller adds
    what only the dev server knows (workers, writers, invocations)."""
    run_id = scoped_id(owner, public_run_id)
    try:
        run = await services.threads.get_run(run_id)
    except RunNotFound:
        return None
    if run.owner != owner:
        return None
    checkpoint = await _checkpoint(services, run_id)
    lease = run.lease
    return {
        "run_id": public_run_id,
        "stored_run_id": run_id,
        "status": run.status.value,
        "turn": run.turn,
        "lease": {
            "epoch": lease.epoch,
            "owner": lease.owner,
            "expires_in": round(lease.lease_until - time.time(), 1) if lease.owner else None,
        },
        "checkpoint": checkpoint,
        "tool_calls": await _tool_claims(services, run),
    }
