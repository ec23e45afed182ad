"""Why a run failed: every code a failed run's error record carries, with its public sentence.

One enum, so a code is written once: the provider errors take their ``code`` from it, the
run loop, the retry policy, the turn endings and the sweeper fail runs with its members, and
the API's table of what a caller may read (:mod:`awaken_s3.service.public_errors`) is derived
from it. A run's error record keeps the classifier's own message beside the code (it may
carry a provider's answer, an ARN, a key's prefix): that text stays in the table and the
worker's log, and a caller is shown the member's ``public_message`` instead.

Members are strings (``FailureCode.STEP_LIMIT == "step_limit"``), so a record written before
this enum existed, or one carrying a code of a user's own, reads the same.
"""

from __future__ import annotations

from enum import StrEnum


class FailureCode(StrEnum):
    """A failed run's error code and the fixed sentence a caller is shown for it."""

    _value_: str
    #: what the API says about a run that failed with this code (never the raw message)
    public_message: str

    def __new__(cls, code: str, public_message: str) -> FailureCode:
        member = str.__new__(cls, code)
        member._value_ = code
        member.public_message = public_message
        return member

    # provider errors (awaken_s3.streaming.errors), by their class's ``code``
    PROVIDER_ERROR = "provider_error", "the model provider returned an error"
    RETRYABLE = "retryable", "the model provider failed temporarily"
    CONNECTION_DROPPED = "connection_dropped", "the connection to the model provider dropped"
    PROVIDER_UNREACHABLE = (
        "provider_unreachable",
        "the service could not connect to the model provider",
    )
    STREAM_STALLED = "stream_stalled", "the model provider stopped sending its answer"
    SERVER_ERROR = "server_error", "the model provider had an internal error"
    THROTTLED = "throttled", "the model provider throttled the request"
    OVERLOADED = "overloaded", "the model provider is overloaded"
    PERMANENT = "permanent", "the model provider refused the request"
    INVALID_REQUEST = "invalid_request", "the model provider rejected the request as invalid"
    PREFILL_REJECTED = (
        "prefill_rejected",
        "the model does not accept a partial answer to continue from",
    )
    AUTHENTICATION_FAILED = (
        "authentication_failed",
        "the service could not authenticate with the model provider",
    )
    QUOTA_EXHAUSTED = "quota_exhausted", "the service's quota at the model provider is exhausted"
    MODEL_NOT_FOUND = "model_not_found", "the model is not available"
    CONTEXT_OVERFLOW = "context_overflow", "the conversation is too long for the model"
    CONTENT_FILTERED = "content_filtered", "the model provider's content filter stopped the answer"
    TOOL_CALLS_LOST = (
        "tool_calls_lost",
        "the model stopped for a tool call that never arrived whole",
    )
    # the turn runner and its retry policy (awaken_s3.streaming.retry)
    UNEXPECTED_ERROR = "unexpected_error", "an unexpected error stopped the run"
    RETRY_BUDGET_EXHAUSTED = "retry_budget_exhausted", "the turn was interrupted too many times"
    # the run loop (awaken_s3.runtime)
    STEP_LIMIT = "step_limit", "the run reached its limit of model turns"
    THREAD_MOVED_ON = "thread_moved_on", "another run changed the thread; start a new run"
    UNKNOWN_TOOL = "unknown_tool", "the run asks for a tool this service does not have"
    UNKNOWN_AGENT = "unknown_agent", "the run names an agent this service does not have"
    NO_PROGRESS = "no_progress", "the run was handed over repeatedly without making progress"
    BUDGET_EXHAUSTED = "budget_exhausted", "the run spent its token budget"
    # tool calls (awaken_s3.runtime.tools)
    TOOL_TIMED_OUT = "tool_timed_out", "a tool call ran out of time on every attempt"
    TOOL_CALL_MISMATCH = (
        "tool_call_mismatch",
        "a tool call's stored record belongs to another call",
    )
    # turn endings (awaken_s3.runtime.endings)
    REFUSAL = "refusal", "the model refused to answer"
    # the sweeper (awaken_s3.service.sweeper)
    ABANDONED = "abandoned", "the run was re-sent repeatedly and never made progress"

    @classmethod
    def of(cls, code: str) -> FailureCode | None:
        """The member for a stored code, or None for a code of no member (a user's own)."""
        return cls._value2member_map_.get(code)  # type: ignore[return-value]
