"""Lambda's SQS event, built from a ``ReceiveMessage`` answer (pure).

The record shape is Lambda's: ``messageId``, ``receiptHandle``, ``body``, ``attributes`` (the
message's system attributes, FIFO ones only on FIFO queues), ``messageAttributes`` in Lambda's
lower-camel form with binary values base64-encoded, ``md5OfBody`` (and
``md5OfMessageAttributes`` when there are attributes), ``eventSource``, ``eventSourceARN`` and
``awsRegion``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: the system attributes a Lambda record carries, in the order Lambda writes them; each is
#: copied when SQS returned it (the FIFO ones only exist on FIFO queues)
RECORD_ATTRIBUTES = (
    "ApproximateReceiveCount",
    "SentTimestamp",
    "SenderId",
    "ApproximateFirstReceiveTimestamp",
    "SequenceNumber",
    "MessageGroupId",
    "MessageDeduplicationId",
    "AWSTraceHeader",
    "DeadLetterQueueSourceArn",
)


@dataclass(frozen=True)
class QueueRecord:
    """One received message: the fields the event source acts on, and its event record."""

    message_id: str
    receipt_handle: str
    body: str
    group_id: str | None
    receive_count: int
    event_record: Mapping[str, Any] = field(repr=False, compare=False)


def _b64(value: bytes | str) -> str:
    # botocore hands binary attribute values over decoded; the Lambda event carries base64.
    if isinstance(value, str):
        return value
    return base64.b64encode(value).decode("ascii")


def lambda_message_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    """An SQS ``MessageAttributeValue`` in the Lambda event's form."""
    converted: dict[str, Any] = {}
    if "StringValue" in value:
        converted["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        converted["binaryValue"] = _b64(value["BinaryValue"])
    converted["stringListValues"] = list(value.get("StringListValues", []))
    converted["binaryListValues"] = [_b64(item) for item in value.get("BinaryListValues", [])]
    converted["dataType"] = value["DataType"]
    return converted


def queue_record(message: Mapping[str, Any], *, queue_arn: str, region: str) -> QueueRecord:
    """The record Lambda builds from one message of a ``ReceiveMessage`` answer (which must have
    asked for all system and message attributes)."""
    received = message.get("Attributes") or {}
    attributes = {name: str(received[name]) for name in RECORD_ATTRIBUTES if name in received}
    message_attributes = message.get("MessageAttributes") or {}
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": {
            name: lambda_message_attribute(value) for name, value in message_attributes.items()
        },
        "md5OfBody": message["MD5OfBody"],
    }
    if message_attributes and "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    record.update(eventSource="aws:sqs", eventSourceARN=queue_arn, awsRegion=region)
    return QueueRecord(
        message_id=record["messageId"],
        receipt_handle=record["receiptHandle"],
        body=record["body"],
        group_id=attributes.get("MessageGroupId"),
        receive_count=int(attributes.get("ApproximateReceiveCount", "0")),
        event_record=record,
    )


def queue_records(
    messages: Iterable[Mapping[str, Any]], *, queue_arn: str, region: str
) -> list[QueueRecord]:
    return [queue_record(m, queue_arn=queue_arn, region=region) for m in messages]


def lambda_event(records: Sequence[QueueRecord]) -> dict[str, Any]:
    """The event one invocation receives: its records in delivery order."""
    return {"Records": [dict(record.event_record) for record in records]}


def account_of(queue_arn: str) -> str:
    """The account id in ``arn:aws:sqs:<region>:<account>:<name>``."""
    parts = queue_arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ValueError(f"not an SQS queue ARN: {queue_arn!r}")
    return parts[4]
