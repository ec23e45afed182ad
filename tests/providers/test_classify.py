"""Error classification from status, type and code (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from awaken_s3.providers.classify import (
    classify_bedrock_error,
    classify_http_error,
    error_fields,
)
from awaken_s3.streaming.errors import (
    AuthenticationFailed,
    ContextOverflow,
    InvalidRequest,
    ModelNotFound,
    Overloaded,
    PermanentProviderError,
    PrefillRejected,
    ProviderError,
    QuotaExhausted,
    RetryableProviderError,
    ServerError,
    StreamStalled,
    Throttled,
)

PREFILL_MSG = "This model does not support assistant message prefill."


@pytest.mark.parametrize(
    ("status", "error_type", "code", "expected"),
    [
        (429, "rate_limit_error", None, Throttled),
        (529, "overloaded_error", None, Overloaded),
        (None, "overloaded_error", None, Overloaded),  # in-stream
        (None, "api_error", None, ServerError),
        (500, "api_error", None, ServerError),
        (503, None, None, ServerError),
        (504, "timeout_error", None, StreamStalled),
        (400, "invalid_request_error", None, InvalidRequest),
        (413, "request_too_large", None, ContextOverflow),
        (400, "invalid_request_error", "context_length_exceeded", ContextOverflow),
        (401, "authentication_error", None, AuthenticationFailed),
        (403, "permission_error", None, AuthenticationFailed),
        (404, "not_found_error", None, ModelNotFound),
        (404, "invalid_request_error", "model_not_found", ModelNotFound),
        (401, "invalid_request_error", "invalid_api_key", AuthenticationFailed),
        (422, "something_new", None, InvalidRequest),
        (502, "something_new", None, ServerError),
        (None, "something_new", None, ServerError),
        (None, None, "500", ServerError),
    ],
)
def test_http_classes(
    status: int | None, error_type: str | None, code: str | None, expected: type[ProviderError]
) -> None:
    error = classify_http_error(
        status=status, error_type=error_type, error_code=code, message="m", provider="p"
    )
    assert type(error) is expected
    assert error.status == status
    assert error.provider == "p"


def test_prefill_rejection_needs_a_trailing_assistant_message() -> None:
    common: dict[str, Any] = {
        "status": 400,
        "error_type": "invalid_request_error",
        "provider": "anthropic",
    }
    rejected = classify_http_error(message=PREFILL_MSG, sent_prefill=True, **common)
    assert isinstance(rejected, PrefillRejected)
    assert isinstance(rejected, PermanentProviderError)
    assert rejected.code == "prefill_rejected"
    # The same words without a prefill in the request are an ordinary bad request.
    assert type(classify_http_error(message=PREFILL_MSG, **common)) is InvalidRequest
    # A prefill request refused for another reason is not a prefill rejection.
    other = classify_http_error(message="max_tokens too large", sent_prefill=True, **common)
    assert type(other) is InvalidRequest


def test_retry_hint_is_carried() -> None:
    error = classify_http_error(
        status=429, error_type="rate_limit_error", message="m", provider="p", retry_after=3.0
    )
    assert isinstance(error, RetryableProviderError)
    assert error.retry_after == 3.0


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("ThrottlingException", Throttled),
        ("throttlingException", Throttled),
        ("serviceUnavailableException", Overloaded),
        ("ServiceUnavailableException", Overloaded),
        ("modelStreamErrorException", ServerError),
        ("internalServerException", ServerError),
        ("ModelTimeoutException", StreamStalled),
        ("validationException", InvalidRequest),
        ("AccessDeniedException", AuthenticationFailed),
        ("ResourceNotFoundException", ModelNotFound),
        ("SomethingNewException", ServerError),
    ],
)
def test_bedrock_codes(code: str, expected: type[ProviderError]) -> None:
    error = classify_bedrock_error(code=code, message="m")
    assert type(error) is expected
    assert error.provider == "bedrock"
    assert error.retryable is issubclass(expected, RetryableProviderError)


def test_bedrock_prefill_rejection() -> None:
    error = classify_bedrock_error(
        code="ValidationException", message=PREFILL_MSG, status=400, sent_prefill=True
    )
    assert isinstance(error, PrefillRejected)


def test_error_fields_reads_wrapped_and_bare_bodies() -> None:
    anthropic_body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "bad",
            "details": {"error_code": "xyz"},
        },
    }
    assert error_fields(anthropic_body) == ("invalid_request_error", "xyz", "bad")
    openai_body = {"message": "slow", "type": "requests", "code": "rate_limit_exceeded"}
    assert error_fields(openai_body) == ("requests", "rate_limit_exceeded", "slow")
    assert error_fields({"error": {"code": 500, "message": "x"}}) == (None, "500", "x")
    assert error_fields("text") == (None, None, None)


def test_an_exhausted_quota_is_permanent_even_on_a_429() -> None:
    error = classify_http_error(
        status=429,
        error_type="insufficient_quota",
        error_code="insufficient_quota",
        message="You exceeded your current quota",
        provider="openai",
        retry_after=5.0,
    )
    assert isinstance(error, QuotaExhausted)
    assert not error.retryable
    # An ordinary rate limit on the same status stays retryable.
    limited = classify_http_error(
        status=429,
        error_type="requests",
        error_code="rate_limit_exceeded",
        message="m",
        provider="p",
    )
    assert isinstance(limited, Throttled)
    assert limited.retryable
