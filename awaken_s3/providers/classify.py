"""Map provider error data (status, error type/code) to typed provider errors (pure).

Both HTTP APIs (Anthropic Messages, OpenAI Chat Completions) report an error
as a status plus a JSON body with a machine-readable ``type`` (and, for OpenAI,
``code``); Bedrock reports a botocore error code (``ThrottlingException`` before
the stream, ``throttlingException`` as an event-stream exception). The type or
code wins over the status because in-stream errors arrive on a 200 response.
"""

from __future__ import annotations

from typing import Final

from awaken_s3.streaming.errors import (
    AuthenticationFailed,
    ContextOverflow,
    InvalidRequest,
    ModelNotFound,
    Overloaded,
    PrefillRejected,
    ProviderError,
    QuotaExhausted,
    ServerError,
    StreamStalled,
    Throttled,
)

# Error ``type`` values shared by the Anthropic API and OpenAI-compatible servers.
_TYPE_CLASSES: Final[dict[str, type[ProviderError]]] = {
    "overloaded_error": Overloaded,
    "rate_limit_error": Throttled,
    "rate_limit_exceeded": Throttled,
    "api_error": ServerError,
    "server_error": ServerError,
    "internal_server_error": ServerError,
    "timeout_error": StreamStalled,
    "authentication_error": AuthenticationFailed,
    "permission_error": AuthenticationFailed,
    "invalid_api_key": AuthenticationFailed,
    "not_found_error": ModelNotFound,
    "model_not_found": ModelNotFound,
    "request_too_large": ContextOverflow,
    "context_length_exceeded": ContextOverflow,
    "string_above_max_length": ContextOverflow,
    "invalid_request_error": InvalidRequest,
    # OpenAI answers an exhausted balance with a 429; retrying cannot cure it.
    "insufficient_quota": QuotaExhausted,
}

_OVERFLOW_CODES: Final = frozenset(
    {"context_length_exceeded", "model_context_window_exceeded", "request_too_large"}
)


def error_fields(body: object) -> tuple[str | None, str | None, str | None]:
    """``(type, code, message)`` from an error body, wrapped (``{"error": {...}}``) or not.

    Anthropic nests a stable code under ``error.details.error_code``; OpenAI puts
    ``code`` beside ``type``.
    """
    if not isinstance(body, dict):
        return None, None, None
    inner = body.get("error")
    error = inner if isinstance(inner, dict) else body
    details = error.get("details")
    code = error.get("code")
    if code is None and isinstance(details, dict):
        code = details.get("error_code")
    error_type = error.get("type")
    message = error.get("message")
    return (
        error_type if isinstance(error_type, str) else None,
        str(code) if code is not None else None,
        message if isinstance(message, str) else None,
    )


def mentions_prefill(message: str | None) -> bool:
    """Whether an error message is the documented "prefill not supported" rejection.

    Neither API gives this rejection its own type or code (it is a plain 400
    ``invalid_request_error`` / ``ValidationException``), so after the
    structured checks, the message is the only way to tell it apart. Two wordings are
    known: Claude 4.6 and later "does not support assistant message prefill", and, with
    thinking on, "a final `assistant` message must start with a thinking block"
    (backticks included, hence their removal before matching).
    """
    if not message:
        return False
    lowered = message.lower().replace("`", "")
    return "prefill" in lowered or "final assistant" in lowered or "last assistant" in lowered


def _status_class(status: int | None) -> type[ProviderError]:
    if status is None:
        return ServerError
    if status == 429:
        return Throttled
    if status == 529:
        return Overloaded
    if status in (408, 504):
        return StreamStalled
    if status >= 500:
        return ServerError
    if status in (401, 403):
        return AuthenticationFailed
    if status == 404:
        return ModelNotFound
    if status == 413:
        return ContextOverflow
    return InvalidRequest


def classify_http_error(
    *,
    status: int | None,
    error_type: str | None,
    error_code: str | None = None,
    message: str,
    provider: str,
    retry_after: float | None = None,
    sent_prefill: bool = False,
) -> ProviderError:
    """The typed error for an HTTP API error (before or inside the stream).

    ``sent_prefill`` says the request ended with an assistant message: only then
    can a 400 be a rejected prefill.
    """
    cls: type[ProviderError] | None = None
    if error_code in _OVERFLOW_CODES:
        cls = ContextOverflow
    elif error_code is not None and error_code in _TYPE_CLASSES:
        cls = _TYPE_CLASSES[error_code]
    if cls is None and error_type is not None:
        cls = _TYPE_CLASSES.get(error_type)
    if cls is None or (cls is InvalidRequest and status not in (None, 200, 400)):
        # An unknown type, or a generic type on a more telling status.
        cls = _status_class(status) if status not in (None, 200) else (cls or ServerError)
    if cls is InvalidRequest and sent_prefill and mentions_prefill(message):
        cls = PrefillRejected
    return cls(message, retry_after=retry_after, status=status, provider=provider)


# Bedrock codes, lower-cased: the HTTP error header says ``ThrottlingException``,
# the event-stream exception header says ``throttlingException``.
_BEDROCK_CLASSES: Final[dict[str, type[ProviderError]]] = {
    "throttlingexception": Throttled,
    "toomanyrequestsexception": Throttled,
    "servicequotaexceededexception": Throttled,
    "serviceunavailableexception": Overloaded,
    "modelnotreadyexception": Overloaded,
    "modelstreamerrorexception": ServerError,
    "internalserverexception": ServerError,
    "modeltimeoutexception": StreamStalled,
    "modelerrorexception": ServerError,
    "validationexception": InvalidRequest,
    "accessdeniedexception": AuthenticationFailed,
    "unrecognizedclientexception": AuthenticationFailed,
    "expiredtokenexception": AuthenticationFailed,
    "invalidsignatureexception": AuthenticationFailed,
    "resourcenotfoundexception": ModelNotFound,
}


def classify_bedrock_error(
    *,
    code: str,
    message: str,
    status: int | None = None,
    retry_after: float | None = None,
    sent_prefill: bool = False,
) -> ProviderError:
    """The typed error for a botocore error code (HTTP error or event-stream exception)."""
    cls = _BEDROCK_CLASSES.get(code.lower())
    if cls is None:
        cls = _status_class(status) if status not in (None, 200) else ServerError
    if cls is InvalidRequest and sent_prefill and mentions_prefill(message):
        cls = PrefillRejected
    return cls(message, retry_after=retry_after, status=status, provider="bedrock")
