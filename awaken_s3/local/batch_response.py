"""Which records an invocation settles (deletes) and which come back (pure).

Lambda's rules for an SQS event source mapping:

- the function failed (an exception, a timeout, a dead runtime): nothing is deleted; every
  record comes back when its visibility timeout runs out;
- the function returned, without ``ReportBatchItemFailures``: every record is deleted, whatever
  the response says;
- with ``ReportBatchItemFailures``: a null response, a response without ``batchItemFailures``,
  or a null or empty list is a complete success; otherwise every record not named by an
  ``itemIdentifier`` is deleted. A response Lambda cannot read as a partial batch response (a
  JSON value that is not an object, a list that is not a list of objects, an entry without
  ``itemIdentifier``, a null or empty identifier, an identifier that is not a message id of the
  batch) fails the whole batch: nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from awaken_s3.errors import AwakenError

#: how an invocation ended, as the event source sees it
Outcome = Literal["ok", "error", "timeout", "killed"]


class InvalidBatchResponse(AwakenError, ValueError):
    """A response that Lambda would treat as a complete failure of the batch."""


@dataclass(frozen=True)
class Settlement:
    #: message ids to delete from the queue
    delete: tuple[str, ...]
    #: message ids left in flight, to come back after their visibility timeout
    retry: tuple[str, ...]
    #: why a returned response failed the whole batch (None when it did not)
    problem: str | None = None


def batch_item_failures(response: Any, message_ids: Sequence[str]) -> frozenset[str]:
    """The message ids a partial batch response names; raises :class:`InvalidBatchResponse`."""
    if response is None:
        return frozenset()
    if not isinstance(response, dict):
        raise InvalidBatchResponse(f"the response is a {type(response).__name__}, not an object")
    failures = response.get("batchItemFailures")
    if failures is None:
        return frozenset()
    if not isinstance(failures, list):
        raise InvalidBatchResponse("batchItemFailures is not a list")
    known = set(message_ids)
    named: set[str] = set()
    for entry in failures:
        if not isinstance(entry, dict) or "itemIdentifier" not in entry:
            raise InvalidBatchResponse("a batchItemFailures entry has no itemIdentifier")
        identifier = entry["itemIdentifier"]
        if not isinstance(identifier, str) or not identifier:
            raise InvalidBatchResponse("an itemIdentifier is null, empty or not a string")
        if identifier not in known:
            raise InvalidBatchResponse(f"itemIdentifier {identifier!r} is not in the batch")
        named.add(identifier)
    return frozenset(named)


def settle(
    message_ids: Sequence[str],
    outcome: Outcome,
    response: Any = None,
    *,
    report_batch_item_failures: bool = True,
) -> Settlement:
    everything = tuple(message_ids)
    if outcome != "ok":
        return Settlement(delete=(), retry=everything)
    if not report_batch_item_failures:
        return Settlement(delete=everything, retry=())
    try:
        failed = batch_item_failures(response, message_ids)
    except InvalidBatchResponse as exc:
        return Settlement(delete=(), retry=everything, problem=str(exc))
    return Settlement(
        delete=tuple(i for i in everything if i not in failed),
        retry=tuple(i for i in everything if i in failed),
    )
