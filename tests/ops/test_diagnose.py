"""How an operator's command explains a failure to reach AWS (awaken_s3.service.diagnose)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, NoRegionError

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.service.diagnose import Target, bad_endpoint_setting, explain

TARGET = Target(
    region="eu-west-1",
    s3_endpoint="http://127.0.0.1:9000",
    dynamodb_endpoint=None,
    bucket="bkt",
    table="tbl",
)


def client_error(code: str, status: int, operation: str) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": "m"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, operation)


def wrapped(cause: BaseException) -> StreamCheckpointError:
    try:
        raise StreamCheckpointError("S3 get of checkpoint failed") from cause
    except StreamCheckpointError as exc:
        return exc


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (NoRegionError(), "no AWS region for bucket bkt and table tbl: set AWS_DEFAULT_REGION"),
        (
            client_error("ResourceNotFoundException", 400, "Query"),
            "table tbl does not exist at DynamoDB AWS, region eu-west-1 (AWAKEN_TABLE)",
        ),
        (
            wrapped(client_error("NoSuchBucket", 404, "GetObject")),
            "bucket bkt does not exist at S3 http://127.0.0.1:9000 (AWAKEN_BUCKET)",
        ),
        (
            client_error("UnrecognizedClientException", 400, "GetItem"),
            "DynamoDB at its AWS endpoint (table tbl) refused the credentials",
        ),
        (
            wrapped(client_error("InvalidAccessKeyId", 403, "GetObject")),
            "S3 at http://127.0.0.1:9000 (bucket bkt) refused the credentials",
        ),
        (
            wrapped(client_error("404", 404, "GetObject")),
            "S3 at http://127.0.0.1:9000 (bucket bkt) answered a bare 404",
        ),
        (StreamCheckpointError("anything else"), "anything else"),
    ],
)
def test_explanations_name_what_was_meant(error: BaseException, expected: str) -> None:
    assert explain(error, TARGET).startswith(expected)


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({}, None),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"}, None),
        ({"AWS_ENDPOINT_URL": "https://s3.example.com"}, None),
        ({"AWS_ENDPOINT_URL": "not-a-url"}, "AWS_ENDPOINT_URL='not-a-url'"),
        ({"AWS_ENDPOINT_URL_S3": "127.0.0.1:5000"}, "AWS_ENDPOINT_URL_S3='127.0.0.1:5000'"),
        ({"AWS_ENDPOINT_URL_DYNAMODB": "http://"}, "AWS_ENDPOINT_URL_DYNAMODB='http://'"),
    ],
)
def test_endpoint_settings_must_be_urls(env: dict[str, str], problem: str | None) -> None:
    found = bad_endpoint_setting(env)
    assert (found is None) if problem is None else (found is not None and problem in found)
