"""The API's pure decisions: what a caller sees of an error, how ids are namespaced per
caller, and which events are not HTTP API requests at all. No AWS."""

from __future__ import annotations

from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.ids import MAX_ID_LENGTH, InvalidIdError, validate_run_id
from awaken_s3.runtime import loop
from awaken_s3.runtime.endings import BUDGET_EXHAUSTED
from awaken_s3.service.public_errors import PUBLIC_MESSAGES, RUN_FAILED, public_error
from awaken_s3.service.scoping import (
    MAX_PUBLIC_ID_LENGTH,
    public_id,
    scoped_id,
    validate_public_run_id,
)
from awaken_s3.service.sweeper import ABANDONED
from awaken_s3.streaming import errors as provider_errors
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.streaming.refusal import REFUSAL
from awaken_s3.streaming.retry import budget_exhausted, classify
from handlers.api import event_problem, subject
from tests.service.conftest import http_event


def _provider_error_classes() -> list[type[provider_errors.ProviderError]]:
    found: list[type[provider_errors.ProviderError]] = []
    pending = [provider_errors.ProviderError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_every_code_the_worker_can_record_has_a_fixed_public_text() -> None:
    codes = {cls.code for cls in _provider_error_classes()}
    codes |= {loop.STEP_LIMIT, loop.THREAD_MOVED_ON, loop.UNKNOWN_TOOL, loop.NO_PROGRESS}
    codes |= {loop.UNKNOWN_AGENT, BUDGET_EXHAUSTED, REFUSAL, ABANDONED}
    codes |= {classify(RuntimeError("x")).code, budget_exhausted(3, "throttled").code}
    assert codes <= set(PUBLIC_MESSAGES), codes - set(PUBLIC_MESSAGES)


@pytest.mark.parametrize(
    ("code", "raw", "shown"),
    [
        (
            "authentication_failed",
            "Incorrect API key provided: sk-ab12****wxyz",
            {
                "code": "authentication_failed",
                "message": "the service could not authenticate with the model provider",
            },
        ),
        (
            "unexpected_error",
            "AccessDeniedException: arn:aws:sts::123456789012:assumed-role/awaken-WorkerRole/x",
            {"code": "unexpected_error", "message": "an unexpected error stopped the run"},
        ),
        (
            "my_plugin_error",
            "db password is hunter2",
            {"code": "my_plugin_error", "message": "the run failed"},
        ),
        ("Bad Code: sk-xyz", "anything", {"code": RUN_FAILED, "message": "the run failed"}),
        ("", "anything", {"code": RUN_FAILED, "message": "the run failed"}),
    ],
)
def test_a_caller_sees_the_code_and_a_fixed_text_never_the_raw_message(
    code: str, raw: str, shown: dict[str, str]
) -> None:
    assert public_error(ClassifiedError(code, raw, retryable=False)) == shown


def test_ids_are_namespaced_per_caller_and_read_back_only_by_their_owner() -> None:
    alice, bob = scoped_id("alice", "t-1"), scoped_id("bob", "t-1")
    assert alice != bob
    assert validate_run_id(alice) == alice  # a valid stored id: a key part, a queue group
    assert public_id("alice", alice) == "t-1"
    with pytest.raises(ValueError):
        public_id("bob", alice)
    with pytest.raises(ValueError):
        public_id("alice", "t-1")  # an unscoped id is nobody's
    # The owner's identity itself never appears in the stored id (keys, logs, the queue).
    assert "alice" not in alice.removesuffix("-t-1")


def test_the_longest_public_id_still_fits_a_stored_id() -> None:
    longest = "x" * MAX_PUBLIC_ID_LENGTH
    assert len(scoped_id("some-sub", longest)) == MAX_ID_LENGTH
    with pytest.raises(InvalidIdError, match="limit"):
        validate_public_run_id(longest + "x")
    with pytest.raises(InvalidIdError):
        scoped_id("some-sub", "../x")


def _without(event: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != key}


GOOD = http_event("GET", "/threads/t-1")
UNAUTHORIZED = (HTTPStatus.UNAUTHORIZED, "unauthorized", "authentication required")
INVALID = (HTTPStatus.BAD_REQUEST, "invalid_event", "not an HTTP API request")


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        (GOOD, None),
        (http_event("POST", "/threads", body={"a": 1}), None),
        (_without(GOOD, "body"), None),
        (_without(GOOD, "requestContext"), UNAUTHORIZED),
        ({**GOOD, "requestContext": None}, UNAUTHORIZED),
        (None, INVALID),
        ([GOOD], INVALID),
        ({**GOOD, "requestContext": _without(GOOD["requestContext"], "http")}, INVALID),
        ({**GOOD, "requestContext": {**GOOD["requestContext"], "http": {"method": 1}}}, INVALID),
        (_without(GOOD, "rawPath"), INVALID),
        ({**GOOD, "headers": "authorization: x"}, INVALID),
        ({**GOOD, "body": 42}, INVALID),
    ],
)
def test_event_problem(event: Any, problem: tuple[HTTPStatus, str, str] | None) -> None:
    assert event_problem(event) == problem


@pytest.mark.parametrize(
    ("claims_path", "sub"),
    [
        ({"authorizer": {"jwt": {"claims": {"sub": "alice"}}}}, "alice"),
        ({"authorizer": {"jwt": {"claims": {"sub": ""}}}}, None),
        ({"authorizer": {"jwt": {"claims": {"sub": 7}}}}, None),
        ({"authorizer": {"jwt": {"claims": None}}}, None),
        ({"authorizer": {"jwt": "x"}}, None),
        ({"authorizer": None}, None),
        ({}, None),
    ],
)
def test_subject_reads_the_jwt_sub_claim_or_nothing(
    claims_path: dict[str, Any], sub: str | None
) -> None:
    assert subject({"requestContext": claims_path}) == sub


def test_the_handlers_doc_lists_every_public_error_text() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "HANDLERS.md").read_text()
    for code, text in PUBLIC_MESSAGES.items():
        assert f"| `{code}` | {text} |" in doc, code


def test_an_id_that_fails_the_rule_is_never_quoted_back() -> None:
    # Every caller-facing 400 that names a bad id uses this sentence (the HTTP API, the dev
    # server's own routes, the socket handler): the id is free text from the request.
    hostile = "<script>alert(1)</script>"
    with pytest.raises(InvalidIdError) as caught:
        validate_run_id(hostile)
    assert "script" not in str(caught.value)
    assert "may only hold" in str(caught.value)
