"""SQS's receipt-handle rules in the local moto server, where moto 5.2 is laxer.

Every receive of a message gives it a new receipt handle; only the latest one names the
receive that holds the message now. moto accepts a ``DeleteMessage`` or a
``ChangeMessageVisibility`` with *any* handle the message ever had, so a worker that lost its
record (its visibility ran out, the queue handed the message to another worker) could still
delete the record the other worker is working on, or move its visibility. SQS documents:

* ``DeleteMessage`` "you must use the ReceiptHandle from the most recent time you received
  the message. If you use an old ReceiptHandle, the request will succeed, but the message
  might not be deleted": an older handle is answered with success and deletes nothing;
* on a FIFO queue a receipt handle whose visibility timeout has run out is refused:
  ``InvalidParameterValue`` "... for parameter ReceiptHandle is invalid. Reason: The receipt
  handle has expired." (a delete as well as a visibility change; a handle superseded by a
  later receive has run out by definition);
* a visibility change "after the visibility timeout has run out might result in an error":
  a change with an older handle is refused the same way, never applied to the new receive.

:func:`verdict` is that table (pure); :func:`install` applies it to moto's SQS backend in
this process (moto's batch actions go through the same two methods). The local servers
(:mod:`awaken_s3.local.moto`, the soak's serial server, the demo's) install it before they
serve; tests/local pins every row against the real server.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

Action = Literal["delete", "visibility"]


class Verdict(StrEnum):
    #: the handle names the receive that holds the message: do what moto does
    APPLY = "apply"
    #: answer success, change nothing (a delete with an older handle)
    IGNORE = "ignore"
    #: refuse: the receipt handle has expired
    EXPIRED = "expired"


def verdict(action: Action, *, fifo: bool, latest: bool, in_flight: bool) -> Verdict:
    """What SQS does with ``action`` given a handle of a message still in the queue.

    ``latest``: the handle is the one of the message's most recent receive; ``in_flight``:
    that receive's visibility timeout has not run out.
    """
    if latest and (in_flight or not fifo):
        return Verdict.APPLY
    if action == "delete" and not fifo and not latest:
        return Verdict.IGNORE
    return Verdict.EXPIRED


def expired_message(receipt_handle: str) -> str:
    return (
        f"Value {receipt_handle} for parameter ReceiptHandle is invalid. "
        "Reason: The receipt handle has expired."
    )


_installed = False


def install() -> None:
    """Apply :func:`verdict` to moto's SQS backend in this process (idempotent)."""
    global _installed
    if _installed:
        return
    from moto.sqs import models
    from moto.sqs.exceptions import ReceiptHandleIsInvalid, SQSException

    class ReceiptHandleExpired(ReceiptHandleIsInvalid):
        # A ReceiptHandleIsInvalid, so that moto's batch actions report it per entry.
        def __init__(self, receipt_handle: str) -> None:
            SQSException.__init__(self, "InvalidParameterValue", expired_message(receipt_handle))

    backend = models.SQSBackend
    delete, change = backend.delete_message, backend.change_message_visibility

    def judged(self: Any, queue_name: str, receipt_handle: str, action: Action) -> Verdict:
        queue = self.get_queue(queue_name)
        for message in queue._messages:
            if message.had_receipt_handle(receipt_handle):
                return verdict(
                    action,
                    fifo=bool(queue.fifo_queue),
                    latest=message.receipt_handle == receipt_handle,
                    in_flight=not message.visible,
                )
        return Verdict.APPLY  # deleted already, or never ours: moto's own answer

    def delete_message(self: Any, queue_name: str, receipt_handle: str) -> None:
        answer = judged(self, queue_name, receipt_handle, "delete")
        if answer is Verdict.EXPIRED:
            raise ReceiptHandleExpired(receipt_handle)
        if answer is Verdict.APPLY:
            delete(self, queue_name, receipt_handle)

    def change_message_visibility(
        self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int
    ) -> None:
        if judged(self, queue_name, receipt_handle, "visibility") is not Verdict.APPLY:
            raise ReceiptHandleExpired(receipt_handle)
        change(self, queue_name, receipt_handle, visibility_timeout)

    backend.delete_message = delete_message  # type: ignore[method-assign]
    backend.change_message_visibility = change_message_visibility  # type: ignore[method-assign]
    _installed = True
