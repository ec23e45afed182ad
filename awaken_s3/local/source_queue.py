"""The event source's queue calls: receive a batch, delete what succeeded, release the rest.

:class:`SourceQueue` wraps the SQS client of one :class:`~.event_source.SqsEventSource`. A
failed delete or release is logged, never raised: the records come back when their visibility
timeout runs out, as Lambda's trigger leaves them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.local.sqs_events import QueueRecord, queue_records

if TYPE_CHECKING:
    from types_aiobotocore_sqs import SQSClient

logger = logging.getLogger(__name__)

#: SQS answers at most 10 messages per ReceiveMessage (and takes 10 entries per batch call)
MAX_BATCH_SIZE = 10


class SourceQueue:
    """``queue_url`` through ``sqs``; ``receiving`` is True while a ReceiveMessage is in
    flight (the event source's stop waits for its answer rather than lose it)."""

    def __init__(self, sqs: SQSClient, queue_url: str, *, queue_arn: str, region: str) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.region = region
        self.receiving = False

    async def receive(self, batch_size: int, wait_time: int) -> list[QueueRecord]:
        self.receiving = True
        try:
            answer = await self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=batch_size,
                WaitTimeSeconds=wait_time,
                # Both spellings: MessageSystemAttributeNames replaced AttributeNames, and an
                # older endpoint may know only the first.
                AttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
        finally:
            self.receiving = False
        return queue_records(
            answer.get("Messages", []), queue_arn=self.queue_arn, region=self.region
        )

    async def delete(self, records: Sequence[QueueRecord], ids: Sequence[str]) -> tuple[str, ...]:
        """Delete the ``records`` whose message id is in ``ids``; the ids deleted."""
        wanted = [r for r in records if r.message_id in set(ids)]
        if not wanted:
            return ()
        try:
            answer = await self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": r.receipt_handle} for i, r in enumerate(wanted)
                ],
            )
        except (ClientError, BotoCoreError) as exc:
            logger.warning("DeleteMessageBatch failed; the records will come back: %s", exc)
            return ()
        failed = {int(f["Id"]) for f in answer.get("Failed", [])}
        for entry in answer.get("Failed", []):
            logger.warning("could not delete a record: %s", entry.get("Message"))
        return tuple(dict.fromkeys(r.message_id for i, r in enumerate(wanted) if i not in failed))

    async def release(self, records: Sequence[QueueRecord]) -> None:
        """Make received records that will not be invoked visible again now."""
        for start in range(0, len(records), MAX_BATCH_SIZE):
            chunk = records[start : start + MAX_BATCH_SIZE]
            try:
                await self.sqs.change_message_visibility_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": r.receipt_handle, "VisibilityTimeout": 0}
                        for i, r in enumerate(chunk)
                    ],
                )
            except (ClientError, BotoCoreError) as exc:
                logger.warning("could not release received records: %s", exc)
