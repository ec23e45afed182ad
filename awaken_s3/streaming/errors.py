"""Typed provider errors.

Classification is by type, never by message text: each provider adapter maps
its SDK's exceptions, HTTP statuses and in-stream error events to one of
these classes. ``retry_after`` is set only when the provider supplied a hint.
"""

from __future__ import annotations

from typing import ClassVar


class ProviderError(Exception):
    retryable: ClassVar[bool] = False
    #: a short stable name for metrics, logs and a failed run's error record
    code: ClassVar[str] = "provider_error"

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
    code = "retryable"


class ConnectionDropped(RetryableProviderError):
    code = "connection_dropped"


class ProviderUnreachable(RetryableProviderError):
    """No connection to the provider's endpoint could be made at all: refused, a host name
    that did not resolve, a failed TLS handshake, a connect timeout.

    Apart from :class:`ConnectionDropped` (a connection made, then lost) because its cure is
    usually a setting, not patience: the retry policy gives it a few attempts (a provider
    restarting) and then fails the run with this error, whose message names the URL and the
    cause. ``url`` holds no user info, query or fragment (where a key may hide).
    """

    code = "provider_unreachable"
    #: the endpoint as the message names it; None when the SDK did not say
    url: str | None = None


class StreamStalled(RetryableProviderError):
    code = "stream_stalled"


class ServerError(RetryableProviderError):
    code = "server_error"


class Throttled(RetryableProviderError):
    code = "throttled"


class Overloaded(RetryableProviderError):
    code = "overloaded"


class ToolCallsLost(RetryableProviderError):
    """The model stopped to use tools, but not one of its calls was complete.

    Ending the run there would take a cut-off tool request for a final answer; asking
    again usually yields whole calls.
    """

    code = "tool_calls_lost"


class PermanentProviderError(ProviderError):
    retryable = False
    code = "permanent"


class InvalidRequest(PermanentProviderError):
    code = "invalid_request"


class PrefillRejected(InvalidRequest):
    """The model refused a trailing assistant message (no prefill support)."""

    code = "prefill_rejected"


class AuthenticationFailed(PermanentProviderError):
    code = "authentication_failed"


class QuotaExhausted(PermanentProviderError):
    """The account is out of credit or quota (a 429 that waiting does not cure)."""

    code = "quota_exhausted"


class ModelNotFound(PermanentProviderError):
    code = "model_not_found"


class ContextOverflow(PermanentProviderError):
    code = "context_overflow"


class ContentFiltered(PermanentProviderError):
    code = "content_filtered"
