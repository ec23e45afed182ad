"""The mapping from AWS client failures to thread-store errors, as a table (pure, no AWS)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
    ReadTimeoutError,
)

from awaken_s3.threads import StoreThrottled, StoreUnavailable, TableNotFound, ThreadStoreError
from awaken_s3.threads.cancellation import cancelled_error
from awaken_s3.threads.client_errors import dynamodb_error, s3_error


def answer(code: str, status: int = 400, retries: int = 0) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": "from AWS"},
        "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": retries},
    }
    return ClientError(response, "AnyOperation")


def name(value: object) -> str:
    if isinstance(value, ClientError):
        return value.response["Error"]["Code"] or "no code"
    return type(value).__name__


DYNAMODB = [
    (answer("ResourceNotFoundException"), TableNotFound),
    (answer("ProvisionedThroughputExceededException", retries=7), StoreThrottled),
    (answer("ThrottlingException"), StoreThrottled),
    (answer("RequestLimitExceeded"), StoreThrottled),
    (answer("InternalServerError", 500), StoreUnavailable),
    (answer("ServiceUnavailable", 503), StoreUnavailable),
    (answer("", 502), StoreUnavailable),
    (EndpointConnectionError(endpoint_url="http://x"), StoreUnavailable),
    (ReadTimeoutError(endpoint_url="http://x"), StoreUnavailable),
    (aiohttp.ClientPayloadError("cut short"), StoreUnavailable),
    (TimeoutError(), StoreUnavailable),
    (ConnectionResetError(), StoreUnavailable),
    # Answers, or the caller's own fault: retrying as is would not help.
    (answer("AccessDeniedException"), ThreadStoreError),
    (answer("ValidationException"), ThreadStoreError),
    (answer("ConditionalCheckFailedException"), ThreadStoreError),
    (NoCredentialsError(), ThreadStoreError),
    (ParamValidationError(report="bad"), ThreadStoreError),
]


@pytest.mark.parametrize(("failure", "error"), DYNAMODB, ids=name)
def test_dynamodb_failures(failure: Exception, error: type[ThreadStoreError]) -> None:
    mapped = dynamodb_error(failure, action="get_run r1", table="threads")
    assert type(mapped) is error
    assert str(mapped).startswith("get_run r1: ") and "'threads'" in str(mapped)


def test_a_missing_table_names_it() -> None:
    mapped = dynamodb_error(answer("ResourceNotFoundException"), action="get_run r1", table="t")
    assert isinstance(mapped, TableNotFound) and mapped.table == "t"


def test_throttling_says_it_outlived_the_clients_retries() -> None:
    mapped = dynamodb_error(answer("ThrottlingException", retries=7), action="a", table="t")
    assert "throttled" in str(mapped) and "after 7 retries; still throttled" in str(mapped)


S3 = [
    (answer("SlowDown", 503), StoreThrottled),
    (answer("InternalError", 500), StoreUnavailable),
    (answer("NoSuchBucket", 404), ThreadStoreError),
    (answer("NoSuchKey", 404), ThreadStoreError),
    (answer("AccessDenied", 403), ThreadStoreError),
    (EndpointConnectionError(endpoint_url="http://x"), StoreUnavailable),
]


@pytest.mark.parametrize(("failure", "error"), S3, ids=name)
def test_offload_failures(failure: Exception, error: type[ThreadStoreError]) -> None:
    mapped = s3_error(failure, action="offloading", bucket="b", key="messages/t1/1.json")
    assert type(mapped) is error
    assert "s3://b/messages/t1/1.json" in str(mapped)


@pytest.mark.parametrize(
    ("codes", "error"),
    [
        (["ThrottlingError", "ThrottlingError"], StoreThrottled),
        (["ProvisionedThroughputExceeded", None, "TransactionConflict"], StoreThrottled),
        (["TransactionConflict", "TransactionConflict"], ThreadStoreError),
        # A reason that no retry can cure is not reported as throttling.
        (["ThrottlingError", "ValidationError"], ThreadStoreError),
        ([None, None], ThreadStoreError),
    ],
)
def test_cancelled_transactions(codes: list[str | None], error: type[ThreadStoreError]) -> None:
    mapped = cancelled_error(codes, action="commit of run r1", table="t")
    assert type(mapped) is error
    assert all(code in str(mapped) for code in codes if code is not None)
