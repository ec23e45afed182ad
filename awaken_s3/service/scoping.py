"""Thread and run ids are namespaced per caller (pure).

A caller chooses its ids (a retried request must name the same thread or run), and ids are
global keys in the table, the queue and the bucket. Were they stored as given, one caller
creating an id another already holds would learn that it exists. So the API stores
``<owner tag>-<id>``: the tag is derived from the caller's identity (the JWT ``sub``), every
lookup is made inside the caller's own namespace, and another caller's id is, for everyone
else, simply an id nobody has used.

The caller sees and sends only its own part; the worker, the queue, logs and S3 keys carry
the stored form.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Final

from pydantic import AfterValidator

from awaken_s3.ids import MAX_ID_LENGTH, InvalidIdError, validate_id

#: hex characters of the owner tag (124 bits: no two callers share one by accident)
TAG_LENGTH: Final = 31
#: the longest id a caller may choose: the stored form must fit MAX_ID_LENGTH
MAX_PUBLIC_ID_LENGTH: Final = MAX_ID_LENGTH - TAG_LENGTH - 1


def owner_tag(owner: str) -> str:
    return hashlib.sha256(owner.encode("utf-8")).hexdigest()[:TAG_LENGTH]


def validate_public_id(value: str, *, kind: str = "id") -> str:
    validate_id(value, kind=kind)
    if len(value) > MAX_PUBLIC_ID_LENGTH:
        raise InvalidIdError(
            f"{kind} is {len(value)} characters long; the limit is {MAX_PUBLIC_ID_LENGTH}"
        )
    return value


def validate_public_thread_id(value: str) -> str:
    return validate_public_id(value, kind="thread id")


def validate_public_run_id(value: str) -> str:
    return validate_public_id(value, kind="run id")


PublicThreadId = Annotated[str, AfterValidator(validate_public_thread_id)]
PublicRunId = Annotated[str, AfterValidator(validate_public_run_id)]


def scoped_id(owner: str, public_id: str) -> str:
    """The stored id of ``owner``'s ``public_id``."""
    return f"{owner_tag(owner)}-{validate_public_id(public_id)}"


def public_id(owner: str, stored_id: str) -> str:
    """``owner``'s own part of a stored id; ValueError for an id outside its namespace."""
    prefix = f"{owner_tag(owner)}-"
    if not stored_id.startswith(prefix) or len(stored_id) == len(prefix):
        raise ValueError(f"stored id {stored_id[:40]!r} is not in the owner's namespace")
    return stored_id[len(prefix) :]
