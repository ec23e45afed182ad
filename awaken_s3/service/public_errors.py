"""What a caller may read about a failed run: its error code and a fixed text per code (pure).

A run's error record keeps the classifier's own message (a provider's answer can carry the
worker role's ARN, or an API key's prefix and last characters); that text stays in the table
and the worker's log. The API answers with the code and its sentence, never the text: the
sentences are :class:`~awaken_s3.failures.FailureCode`'s, the one list of codes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from awaken_s3.failures import FailureCode
from awaken_s3.streaming.outcome import ClassifiedError

#: the code shown for an error whose own code is not a plain identifier
RUN_FAILED: Final = "run_failed"
_GENERIC: Final = "the run failed"
_CODE_RE: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")

#: code -> the sentence a caller is shown, derived from the enum
PUBLIC_MESSAGES: Final[Mapping[str, str]] = {
    code.value: code.public_message for code in FailureCode
}


def public_error(error: ClassifiedError) -> dict[str, str]:
    """``{"code", "message"}`` for a caller: a known code's fixed text, else a generic one."""
    known = FailureCode.of(error.code)
    if known is not None:
        return {"code": known.value, "message": known.public_message}
    code = error.code if _CODE_RE.fullmatch(error.code) else RUN_FAILED
    return {"code": code, "message": _GENERIC}
