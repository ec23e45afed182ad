"""Typed provider errors (under :class:`awaken_s3.errors.AwakenError`).

Classification is by type, never by message text: each provider adapter maps
its SDK's exceptions, HTTP statuses and in-stream error events to one of
these classes. ``retry_after`` is set only when the provider supplied a hint.
"""

from __future__ import annotations

from typing import ClassVar

from awaken_s3.errors import AwakenError
from awaken_s3.failures import FailureCode


class ProviderError(AwakenError):
    retryable: ClassVar[bool] = False
    #: a short stable name for metrics, logs and a failed run's error record: a
    #: :class:`~awaken_s3.failures.FailureCode` (an adapter of one's own may use a code of its
    #: own, shown to API callers as "the run failed")
    code: ClassVar[str] = FailureCode.PROVIDER_ERROR

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status
        self.provider = provider


class RetryableProviderError(ProviderError):
    retryable = True
    code = FailureCode.RETRYABLE


class ConnectionDropped(RetryableProviderError):
    code = FailureCode.CONNECTION_DROPPED


class ProviderUnreachable(RetryableProviderError):
    """No connection to the provider's endpoint could be made at all: refused, a host name
    that did not resolve, a failed TLS handshake, a connect timeout.

    Apart from :class:`ConnectionDropped` (a connection made, then lost) because its cure is
    usually a setting, not patience: the retry policy gives it a few attempts (a provider
    restarting) and then fails the run with this error, whose message names the URL and the
    cause. ``url`` holds no user info, query or fragment (where a key may hide).
    """

    code = FailureCode.PROVIDER_UNREACHABLE
    #: the endpoint as the message names it; None when the SDK did not say
    url: str | None = None


class StreamStalled(RetryableProviderError):
    code = FailureCode.STREAM_STALLED


class ServerError(RetryableProviderError):
    code = FailureCode.SERVER_ERROR


class Throttled(RetryableProviderError):
    code = FailureCode.THROTTLED


class Overloaded(RetryableProviderError):
    code = FailureCode.OVERLOADED


class ToolCallsLost(RetryableProviderError):
    """The model stopped to use tools, but not one of its calls was complete.

    Ending the run there would take a cut-off tool request for a final answer; asking
    again usually yields whole calls.
    """

    code = FailureCode.TOOL_CALLS_LOST


class PermanentProviderError(ProviderError):
    retryable = False
    code = FailureCode.PERMANENT


class InvalidRequest(PermanentProviderError):
    code = FailureCode.INVALID_REQUEST


class PrefillRejected(InvalidRequest):
    """The model refused a trailing assistant message (no prefill support)."""

    code = FailureCode.PREFILL_REJECTED


class AuthenticationFailed(PermanentProviderError):
    code = FailureCode.AUTHENTICATION_FAILED


class QuotaExhausted(PermanentProviderError):
    """The account is out of credit or quota (a 429 that waiting does not cure)."""

    code = FailureCode.QUOTA_EXHAUSTED


class ModelNotFound(PermanentProviderError):
    code = FailureCode.MODEL_NOT_FOUND


class ContextOverflow(PermanentProviderError):
    code = FailureCode.CONTEXT_OVERFLOW


class ContentFiltered(PermanentProviderError):
    code = FailureCode.CONTENT_FILTERED
