"""Identifier validation.

Run and thread ids become S3 object keys and DynamoDB key parts, so they are
validated before any I/O: a bounded alphabet without ``/`` or ``.`` makes
path traversal (``..``) and key collisions impossible by construction.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from awaken_s3.errors import AwakenError

MAX_ID_LENGTH = 128
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


class InvalidIdError(AwakenError, ValueError):
    """An id that cannot safely name an object or an item."""


def validate_id(value: str, *, kind: str = "id") -> str:
    if not isinstance(value, str):
        raise InvalidIdError(f"{kind} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidIdError(f"{kind} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidIdError(
            f"{kind} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}"
        )
    if _ID_RE.fullmatch(value) is None:
        raise InvalidIdError(
            # The value itself is never quoted: this sentence reaches API callers, and an id
            # that fails the rule is free text from the request.
            f"{kind} may only hold ASCII letters, digits, '-' and '_' "
            "and must start with a letter or digit"
        )
    return value


def validate_run_id(value: str) -> str:
    return validate_id(value, kind="run id")


def validate_thread_id(value: str) -> str:
    return validate_id(value, kind="thread id")


RunId = Annotated[str, AfterValidator(validate_run_id)]
ThreadId = Annotated[str, AfterValidator(validate_thread_id)]
