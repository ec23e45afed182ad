"""What a caller may read about a failed run: its error code and a fixed text per code (pure).

A run's error record keeps the classifier's own message (a provider's answer can carry the
worker role's ARN, or an API key's prefix and last characters); that text stays in the table
and the worker's log. The API answers with the code and the sentence below, never the text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from awaken_s3.streaming.outcome import ClassifiedError

#: the code shown for an error whose own code is not a plain identifier
RUN_FAILED: Final = "run_failed"
_GENERIC: Final = "the run failed"
_CODE_RE: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")

PUBLIC_MESSAGES: Final[Mapping[str, str]] = {
    # provider errors (awaken_s3.streaming.errors)
    "provider_error": "the model provider returned an error",
    "retryable": "the model provider failed temporarily",
    "connection_dropped": "the connection to the model provider dropped",
    "provider_unreachable": "the service could not connect to the model provider",
    "stream_stalled": "the model provider stopped sending its answer",
    "server_error": "the model provider had an internal error",
    "throttled": "the model provider throttled the request",
    "overloaded": "the model provider is overloaded",
    "permanent": "the model provider refused the request",
    "invalid_request": "the model provider rejected the request as invalid",
    "prefill_rejected": "the model does not accept a partial answer to continue from",
    "authentication_failed": "the service could not authenticate with the model provider",
    "quota_exhausted": "the service's quota at the model provider is exhausted",
    "model_not_found": "the model is not available",
    "context_overflow": "the conversation is too long for the model",
    "content_filtered": "the model provider's content filter stopped the answer",
    "tool_calls_lost": "the model stopped for a tool call that never arrived whole",
    # the turn runner and retry policy (awaken_s3.streaming)
    "unexpected_error": "an unexpected error stopped the run",
    "retry_budget_exhausted": "the turn was interrupted too many times",
    # the run loop (awaken_s3.runtime.loop)
    "step_limit": "the run reached its limit of model turns",
    "thread_moved_on": "another run changed the thread; start a new run",
    "unknown_tool": "the run asks for a tool this service does not have",
    "no_progress": "the run was handed over repeatedly without making progress",
    # turn endings (awaken_s3.runtime.endings)
    "refusal": "the model refused to answer",
    # the sweeper (awaken_s3.service.sweeper)
    "abandoned": "the run was re-sent repeatedly and never made progress",
}


def public_error(error: ClassifiedError) -> dict[str, str]:
    """``{"code", "message"}`` for a caller: a known code's fixed text, else a generic one."""
    if error.code in PUBLIC_MESSAGES:
        return {"code": error.code, "message": PUBLIC_MESSAGES[error.code]}
    code = error.code if _CODE_RE.fullmatch(error.code) else RUN_FAILED
    return {"code": code, "message": _GENERIC}
