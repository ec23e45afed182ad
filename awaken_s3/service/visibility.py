"""The visibility of the records one worker invocation holds, taken in hand at once.

Lambda receives a batch with the queue's own visibility timeout, which must outlast the whole
function timeout; a record whose worker dies keeps that visibility unless the worker changed
it. So the handler, before it claims anything, hides every record of its batch for the lease
plus the visibility margin, and keeps the ones still waiting their turn hidden so while an
earlier record runs (every third of a lease, as the lease itself is renewed). From its claim
on, a record's visibility follows its run's lease (the run loop's heartbeat). A worker that
dies anywhere after its handler started therefore lets its records come back about one lease
period later; only a death during the runtime's init waits for the queue's visibility
timeout (docs/THREADS.md, "Recovery paths").

A change that fails (SQS throttling, a receipt handle that is no longer the latest, as after a
redelivery) is logged and otherwise ignored: the record then keeps the visibility it had,
which errs on the side of waiting, never of a duplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

log = logging.getLogger("awaken_s3.worker")

#: SQS changes at most 10 messages per ChangeMessageVisibilityBatch
_BATCH = 10


class BatchVisibility:
    """``receipts``: message id -> receipt handle of the invocation's records."""

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        receipts: Mapping[str, str],
        *,
        seconds: int,
        interval: float,
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.seconds = seconds
        self.interval = interval
        #: records not handed to the run loop yet, in batch order
        self.waiting = dict(receipts)

    async def take(self) -> None:
        """Hide every waiting record for ``seconds`` from now."""
        from botocore.exceptions import BotoCoreError, ClientError

        items = list(self.waiting.items())
        for start in range(0, len(items), _BATCH):
            entries = [
                {"Id": str(n), "ReceiptHandle": handle, "VisibilityTimeout": self.seconds}
                for n, (_, handle) in enumerate(items[start : start + _BATCH])
            ]
            try:
                answer = await self.sqs.change_message_visibility_batch(
                    QueueUrl=self.queue_url, Entries=entries
                )
            except (ClientError, BotoCoreError) as exc:
                log.warning("could not take the batch's visibility in hand: %s", exc)
                continue
            for failed in answer.get("Failed", []):
                log.warning(
                    "could not hide a record of the batch: %s %s",
                    failed.get("Code"),
                    failed.get("Message"),
                )

    def started(self, message_id: str) -> None:
        """The record is the run loop's now: its visibility follows its run's lease."""
        self.waiting.pop(message_id, None)

    @contextlib.asynccontextmanager
    async def kept_while(self) -> AsyncIterator[None]:
        """Keep the waiting records hidden while the current one runs."""
        if not self.waiting or self.interval <= 0:
            yield
            return
        task = asyncio.create_task(self._keep(), name="batch-visibility")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _keep(self) -> None:
        while self.waiting:
            await asyncio.sleep(self.interval)
            await self.take()


def receipts_of(event: Mapping[str, Any]) -> dict[str, str]:
    """Message id -> receipt handle of an SQS event's records (pure; malformed ones skipped)."""
    receipts: dict[str, str] = {}
    for record in event.get("Records") or []:
        if not isinstance(record, Mapping):
            continue
        message_id, handle = record.get("messageId"), record.get("receiptHandle")
        if isinstance(message_id, str) and isinstance(handle, str) and handle:
            receipts[message_id] = handle
    return receipts
