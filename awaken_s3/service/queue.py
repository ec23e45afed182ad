"""The run queue: the message schema and how a message is sent.

A message names a run (``{"run_id": ..., "reason": ...}``); everything else the worker
needs is committed in DynamoDB. FIFO queues (URL ending in ``.fifo``) deduplicate for five
minutes, so every send carries an explicit deduplication id that is unique per *intended*
delivery: a retried send of the same intent collapses, a new intent (a later continuation)
never does. Standard queues get neither a group nor a deduplication id.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from awaken_s3.ids import RunId

#: start: the API created the run; continue: a worker handed it over; rescue: the sweeper
#: found it undriven
Reason = Literal["start", "continue", "rescue"]
#: SQS caps MessageDeduplicationId at 128 characters
_MAX_DEDUP_ID = 128


class RunMessage(BaseModel):
    """The body of a queue message. Unknown fields are ignored so that a newer sender never
    makes an older worker drop a message as malformed."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    run_id: RunId
    reason: Reason = "start"


def run_id_of(body: str) -> str | None:
    """The run id a message body names, unchecked; None for a body that names none (pure,
    never raises: for tools that watch the queue, not for the worker, which validates)."""
    import json

    try:
        value = json.loads(body).get("run_id")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def is_fifo(queue_url: str) -> bool:
    return queue_url.rstrip("/").endswith(".fifo")


def deduplication_id(run_id: str, reason: Reason, *, epoch: int = 0, turn: int = 0) -> str:
    """Unique per intended delivery: a start is one intent per run; a continuation is one
    intent per (lease epoch, turn), because every claim increments the epoch; a rescue is
    one intent per (epoch, rescue count), passed as ``turn``."""
    digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:48]
    value = f"{reason}-{epoch}-{turn}-{digest}"
    assert len(value) <= _MAX_DEDUP_ID
    return value


def send_message_args(
    queue_url: str, message: RunMessage, *, epoch: int = 0, turn: int = 0
) -> dict[str, Any]:
    """The ``SendMessage`` parameters for ``message`` on ``queue_url`` (pure)."""
    args: dict[str, Any] = {"QueueUrl": queue_url, "MessageBody": message.model_dump_json()}
    if is_fifo(queue_url):
        args["MessageGroupId"] = message.run_id
        args["MessageDeduplicationId"] = deduplication_id(
            message.run_id, message.reason, epoch=epoch, turn=turn
        )
    return args


async def send_run_message(
    sqs: Any, queue_url: str, message: RunMessage, *, epoch: int = 0, turn: int = 0
) -> str:
    """Send ``message``; returns the SQS message id. Errors propagate: the caller decides
    (the API answers 5xx and the client retries; the worker fails the record)."""
    response = await sqs.send_message(
        **send_message_args(queue_url, message, epoch=epoch, turn=turn)
    )
    return str(response["MessageId"])


async def set_visibility(sqs: Any, queue_url: str, receipt_handle: str, seconds: int) -> None:
    """Make a received message visible again in ``seconds`` from now (instead of the queue's
    visibility timeout, which must outlast the worker's whole timeout): to keep it hidden
    while its worker is alive, or to bring a kept record back sooner."""
    await sqs.change_message_visibility(
        QueueUrl=queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
    )
