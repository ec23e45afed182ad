"""One-line explanations of why AWS could not be reached, for operators' commands (pure).

A botocore error alone says "Could not connect to the endpoint URL" or "You must specify a
region"; an operator needs to know which endpoint, bucket or table was meant and which
setting to change. :func:`explain` walks an exception's causes (the stores wrap botocore's
errors) and names them.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from awaken_s3.causes import exception_chain

#: the variables botocore reads for the endpoints these commands use
ENDPOINT_VARIABLES: Final = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB")
_CREDENTIAL_CODES: Final = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "UnrecognizedClientException",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
    }
)


@dataclass
class Target:
    """What a command was talking to."""

    region: str | None
    s3_endpoint: str | None
    dynamodb_endpoint: str | None
    bucket: str
    table: str | None = None

    def s3(self) -> str:
        return f"S3 at {self.s3_endpoint or 'its AWS endpoint'} (bucket {self.bucket})"

    def dynamodb(self) -> str:
        return f"DynamoDB at {self.dynamodb_endpoint or 'its AWS endpoint'} (table {self.table})"

    def both(self) -> str:
        parts = [f"bucket {self.bucket}"] + ([f"table {self.table}"] if self.table else [])
        return " and ".join(parts)


def bad_endpoint_setting(env: Mapping[str, str]) -> str | None:
    """A usage error for an endpoint variable that is not an http(s) URL, or None."""
    for name in ENDPOINT_VARIABLES:
        value = env.get(name)
        if not value:
            continue
        parsed = urllib.parse.urlsplit(value)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            return f"{name}={value!r} is not an endpoint URL (like http://127.0.0.1:5000)"
    return None


def _service(exc: BaseException, target: Target) -> str:
    """Which service a botocore error came from, as the target names it."""
    text = str(exc)
    operation = getattr(exc, "operation_name", "") or ""
    dynamo_ops = ("Item", "Query", "Scan", "Transact", "Table")
    if any(op in operation for op in dynamo_ops) or (
        target.dynamodb_endpoint is not None
        and target.dynamodb_endpoint != target.s3_endpoint
        and target.dynamodb_endpoint in text
    ):
        return target.dynamodb()
    if "dynamodb" in text.lower():
        return target.dynamodb()
    return target.s3()


def explain(exc: BaseException, target: Target) -> str:
    """What went wrong, naming the endpoint, bucket or table, and what to set."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
        ReadTimeoutError,
    )

    from awaken_s3.stores.s3_protocol import error_code, http_status

    for cause in exception_chain(exc):
        if isinstance(cause, NoRegionError):
            return (
                f"no AWS region for {target.both()}: set AWS_DEFAULT_REGION (or AWS_REGION, "
                "or a region in your AWS profile)"
            )
        if isinstance(cause, NoCredentialsError | PartialCredentialsError):
            return (
                f"no AWS credentials found for {target.both()}: set AWS_PROFILE, or "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (any values for a local server)"
            )
        unreachable = (
            EndpointConnectionError,
            ConnectTimeoutError,
            ReadTimeoutError,
            ConnectionClosedError,
        )
        if isinstance(cause, unreachable):
            return f"cannot reach {_service(cause, target)}: {cause}"
        if isinstance(cause, ClientError):
            code, status = error_code(cause.response), http_status(cause.response)
            if code == "NoSuchBucket":
                where = target.s3_endpoint or "AWS"
                return f"bucket {target.bucket} does not exist at S3 {where} (AWAKEN_BUCKET)"
            if code == "ResourceNotFoundException":
                where = target.dynamodb_endpoint or f"AWS, region {target.region}"
                return f"table {target.table} does not exist at DynamoDB {where} (AWAKEN_TABLE)"
            if code in _CREDENTIAL_CODES:
                return f"{_service(cause, target)} refused the credentials: {code}"
            if status == 404 and code in ("", "404", "NotFound"):
                return (
                    f"{_service(cause, target)} answered a bare 404: is the endpoint an S3 "
                    "server? (AWS_ENDPOINT_URL)"
                )
        if isinstance(cause, ValueError) and str(cause).startswith("Invalid endpoint"):
            return f"{cause}: set AWS_ENDPOINT_URL to an http(s) URL, or unset it"
    return str(exc)
