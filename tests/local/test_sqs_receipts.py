"""SQS's receipt-handle rules on the local servers, where moto alone is laxer: a handle that a
later receive superseded (or, on a FIFO queue, whose visibility ran out) never deletes or
moves the record another receiver now holds (awaken_s3.local.sqs_receipts)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from awaken_s3.local.sqs_receipts import Verdict, verdict
from tests.local.conftest import Sqs


@pytest.mark.parametrize(
    ("action", "fifo", "latest", "in_flight", "expected"),
    [
        # The receive that holds the message: SQS does as asked.
        ("delete", False, True, True, Verdict.APPLY),
        ("delete", True, True, True, Verdict.APPLY),
        ("visibility", True, True, True, Verdict.APPLY),
        # A standard queue still honours the latest handle after its visibility ran out.
        ("delete", False, True, False, Verdict.APPLY),
        ("visibility", False, True, False, Verdict.APPLY),
        # An older handle: the delete "succeeds", but the message is not deleted...
        ("delete", False, False, True, Verdict.IGNORE),
        # ... and on a FIFO queue it has expired, as has the latest one out of its visibility.
        ("delete", True, False, True, Verdict.EXPIRED),
        ("delete", True, True, False, Verdict.EXPIRED),
        ("visibility", True, True, False, Verdict.EXPIRED),
        # A visibility change is never applied through an older handle.
        ("visibility", False, False, True, Verdict.EXPIRED),
        ("visibility", True, False, True, Verdict.EXPIRED),
    ],
)
def test_the_receipt_handle_rules(
    action: Any, fifo: bool, latest: bool, in_flight: bool, expected: Verdict
) -> None:
    assert verdict(action, fifo=fifo, latest=latest, in_flight=in_flight) is expected


def received_twice(sqs: Sqs, *, fifo: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A message received, made visible again, and received by someone else."""
    url, _ = sqs.queue(fifo=fifo, visibility=30)
    sqs.send(url, {"id": "m"}, group="g" if fifo else None)
    first = sqs.client.receive_message(QueueUrl=url)["Messages"][0]
    sqs.client.change_message_visibility(
        QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0
    )
    second = sqs.client.receive_message(QueueUrl=url)["Messages"][0]
    assert second["MessageId"] == first["MessageId"]
    assert second["ReceiptHandle"] != first["ReceiptHandle"]
    return url, first, second


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_an_older_receipt_handle_never_touches_the_new_receive(sqs: Sqs, fifo: bool) -> None:
    url, old, new = received_twice(sqs, fifo=fifo)
    if fifo:
        with pytest.raises(ClientError) as refused:
            sqs.client.delete_message(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"])
        assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
        assert "expired" in refused.value.response["Error"]["Message"]
    else:
        # Success, as SQS documents for an old handle; the message is not deleted.
        sqs.client.delete_message(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"])
    assert sqs.counts(url) == (0, 1)
    with pytest.raises(ClientError, match="expired"):
        sqs.client.change_message_visibility(
            QueueUrl=url, ReceiptHandle=old["ReceiptHandle"], VisibilityTimeout=0
        )
    assert sqs.counts(url) == (0, 1)  # still hidden for its new receiver
    batch = sqs.client.delete_message_batch(
        QueueUrl=url, Entries=[{"Id": "0", "ReceiptHandle": old["ReceiptHandle"]}]
    )
    assert bool(batch.get("Failed")) == fifo
    assert sqs.counts(url) == (0, 1)
    # The receiver that holds it now acknowledges it.
    sqs.client.delete_message(QueueUrl=url, ReceiptHandle=new["ReceiptHandle"])
    assert sqs.counts(url) == (0, 0)


def test_a_fifo_receipt_handle_out_of_its_visibility_has_expired(sqs: Sqs) -> None:
    url, _ = sqs.queue(fifo=True, visibility=30)
    sqs.send(url, {"id": "m"}, group="g")
    [message] = sqs.client.receive_message(QueueUrl=url)["Messages"]
    sqs.client.change_message_visibility(
        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    with pytest.raises(ClientError, match="expired"):
        sqs.client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert sqs.counts(url) == (1, 0)  # back in the queue, for the next receiver
