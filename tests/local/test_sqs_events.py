"""Lambda's SQS event built from ReceiveMessage answers (pure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.local.sqs_events import (
    account_of,
    lambda_event,
    lambda_message_attribute,
    queue_record,
)

ARN = "arn:aws:sqs:eu-west-1:123456789012:runs.fifo"
SAM_EVENT = Path(__file__).parents[1] / "service" / "events" / "sqs_receive_message.json"


def message(**overrides: Any) -> dict[str, Any]:
    """A ReceiveMessage answer's message, as botocore returns it."""
    base: dict[str, Any] = {
        "MessageId": "19dd0b57-b21e-4ac1-bd88-01bbb068cb78",
        "ReceiptHandle": "MessageReceiptHandle",
        "MD5OfBody": "7b270e59b47ff90a553787216d55d91d",
        "Body": "Hello from SQS!",
        "Attributes": {
            "SenderId": "123456789012",
            "ApproximateFirstReceiveTimestamp": "1523232000001",
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1523232000000",
        },
    }
    base.update(overrides)
    return base


def test_a_standard_queue_record_matches_the_sam_generated_event() -> None:
    expected = json.loads(SAM_EVENT.read_text())
    arn = expected["Records"][0]["eventSourceARN"]
    record = queue_record(message(), queue_arn=arn, region="us-east-1")
    event = lambda_event([record])
    assert event == expected
    # Key order too, as Lambda writes it.
    assert list(event["Records"][0]) == list(expected["Records"][0])
    assert list(event["Records"][0]["attributes"]) == list(expected["Records"][0]["attributes"])
    assert (record.message_id, record.receipt_handle, record.body) == (
        "19dd0b57-b21e-4ac1-bd88-01bbb068cb78",
        "MessageReceiptHandle",
        "Hello from SQS!",
    )
    assert (record.group_id, record.receive_count) == (None, 1)


def test_a_fifo_record_carries_the_group_deduplication_id_and_sequence_number() -> None:
    fifo = message(
        Attributes={
            **message()["Attributes"],
            "ApproximateReceiveCount": "3",
            "MessageGroupId": "run-1",
            "MessageDeduplicationId": "start-0-0-abc",
            "SequenceNumber": "18849496460467696128",
            "SomethingNew": "not a record attribute",
        }
    )
    record = queue_record(fifo, queue_arn=ARN, region="eu-west-1")
    attributes = record.event_record["attributes"]
    assert attributes == {
        "ApproximateReceiveCount": "3",
        "SentTimestamp": "1523232000000",
        "SenderId": "123456789012",
        "ApproximateFirstReceiveTimestamp": "1523232000001",
        "SequenceNumber": "18849496460467696128",
        "MessageGroupId": "run-1",
        "MessageDeduplicationId": "start-0-0-abc",
    }
    assert (record.group_id, record.receive_count) == ("run-1", 3)
    assert record.event_record["eventSourceARN"] == ARN
    assert record.event_record["awsRegion"] == "eu-west-1"


def test_message_attributes_take_lambda_s_lower_camel_form_with_base64_binaries() -> None:
    with_attributes = message(
        MessageAttributes={
            "text": {"DataType": "String", "StringValue": "hello"},
            "count": {"DataType": "Number", "StringValue": "42"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"},
        },
        MD5OfMessageAttributes="0123456789abcdef0123456789abcdef",
    )
    record = queue_record(with_attributes, queue_arn=ARN, region="eu-west-1").event_record
    assert record["messageAttributes"] == {
        "text": {
            "stringValue": "hello",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "String",
        },
        "count": {
            "stringValue": "42",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Number",
        },
        "blob": {
            "binaryValue": "AAH/",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Binary",
        },
    }
    assert record["md5OfMessageAttributes"] == "0123456789abcdef0123456789abcdef"
    # Without attributes there is no attribute digest.
    plain = queue_record(message(), queue_arn=ARN, region="eu-west-1").event_record
    assert "md5OfMessageAttributes" not in plain


def test_list_values_are_converted_too() -> None:
    converted = lambda_message_attribute(
        {"DataType": "Binary", "BinaryListValues": [b"0", b"1"], "StringListValues": ["a"]}
    )
    assert converted == {
        "stringListValues": ["a"],
        "binaryListValues": ["MA==", "MQ=="],
        "dataType": "Binary",
    }


def test_the_event_keeps_delivery_order() -> None:
    records = [
        queue_record(message(MessageId=f"m{i}", Body=str(i)), queue_arn=ARN, region="eu-west-1")
        for i in range(3)
    ]
    assert [r["messageId"] for r in lambda_event(records)["Records"]] == ["m0", "m1", "m2"]


def test_account_of_reads_the_queue_arn() -> None:
    assert account_of(ARN) == "123456789012"
    with pytest.raises(ValueError, match="not an SQS queue ARN"):
        account_of("arn:aws:sns:eu-west-1:123456789012:topic")
