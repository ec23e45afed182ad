"""What a failed AWS call means to the thread store (pure: reads an exception, sends nothing).

One mapping, for every DynamoDB call of the store and the S3 calls of its message offload,
from the client's exceptions to the store's own (the table in
:mod:`awaken_s3.threads.errors`). Call sites handle the answers that are outcomes of the
contract (a lost condition, a cancelled transaction) and hand everything else here, so no
botocore exception escapes the store.
"""

from __future__ import annotations

from typing import Final

import aiohttp
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    IncompleteReadError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from awaken_s3.stores import s3_protocol
from awaken_s3.threads.errors import (
    StoreThrottled,
    StoreUnavailable,
    TableNotFound,
    ThreadStoreError,
)

#: everything an aiobotocore call raises when it fails: an AWS answer (ClientError), a
#: botocore failure (BotoCoreError: transport, credentials, parameters), and, for a body cut
#: short while it is read, aiohttp's and the OS's own errors, which botocore does not wrap
CLIENT_ERRORS: Final = (
    ClientError,
    BotoCoreError,
    aiohttp.ClientError,
    OSError,
    TimeoutError,
)
#: the ones that mean no answer came (the others are answers, or the caller's own fault)
_NO_ANSWER: Final = (
    BotoConnectionError,
    HTTPClientError,
    IncompleteReadError,
    aiohttp.ClientError,
    OSError,
    TimeoutError,
)
#: error codes of a throttled request: DynamoDB's, and S3's ``SlowDown``
THROTTLING_CODES: Final = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "SlowDown",
    }
)
#: codes of a request that may or may not have applied, and may go through later (a
#: transaction whose token is still being applied included)
_UNAVAILABLE_CODES: Final = frozenset(
    {
        "InternalServerError",
        "ServiceUnavailable",
        "InternalError",
        "TransactionInProgressException",
    }
)


def error_code(exc: ClientError) -> str:
    return s3_protocol.error_code(exc.response)


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _retries(exc: ClientError) -> str:
    retries = int(exc.response.get("ResponseMetadata", {}).get("RetryAttempts") or 0)
    if not retries:
        return "the client did not retry"
    return f"after {retries} {'retry' if retries == 1 else 'retries'}"


def _describe(exc: ClientError) -> str:
    message = exc.response.get("Error", {}).get("Message")
    code = error_code(exc) or f"HTTP {_status(exc)}"
    return f"{code}: {message}" if message else code


def _transient(
    exc: BaseException, *, action: str, service: str, where: str
) -> ThreadStoreError | None:
    """StoreThrottled / StoreUnavailable for a throttled, failing or unreachable service."""
    if isinstance(exc, ClientError):
        code = error_code(exc)
        if code in THROTTLING_CODES:
            return StoreThrottled(
                f"{action}: {service} throttled the request to {where} ({code}), "
                f"{_retries(exc)}; still throttled"
            )
        if code in _UNAVAILABLE_CODES or _status(exc) >= 500:
            return StoreUnavailable(
                f"{action}: {service} failed to serve {where} ({_describe(exc)}), {_retries(exc)}"
            )
        return None
    if isinstance(exc, _NO_ANSWER):
        return StoreUnavailable(
            f"{action}: {service} did not answer for {where} ({type(exc).__name__}: {exc})"
        )
    return None


def dynamodb_error(exc: BaseException, *, action: str, table: str) -> ThreadStoreError:
    """The store error for a failed call on ``table`` (chain ``exc`` when raising it)."""
    where = f"table {table!r}"
    if isinstance(exc, ClientError) and error_code(exc) == "ResourceNotFoundException":
        return TableNotFound(
            f"{action}: DynamoDB {where} does not exist (check the table name, and the region "
            "and account of the credentials)",
            table=table,
        )
    transient = _transient(exc, action=action, service="DynamoDB", where=where)
    if transient is not None:
        return transient
    detail = _describe(exc) if isinstance(exc, ClientError) else f"{type(exc).__name__}: {exc}"
    return ThreadStoreError(f"{action}: DynamoDB {where}: {detail}")


def s3_error(exc: BaseException, *, action: str, bucket: str, key: str) -> ThreadStoreError:
    """The store error for a failed offload call on ``s3://bucket/key``."""
    where = f"s3://{bucket}/{key}"
    transient = _transient(exc, action=action, service="S3", where=where)
    if transient is not None:
        return transient
    detail = _describe(exc) if isinstance(exc, ClientError) else f"{type(exc).__name__}: {exc}"
    return ThreadStoreError(f"{action}: {where}: {detail}")
