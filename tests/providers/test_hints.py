"""Retry-After parsing: both header forms, the millisecond header, the 60 s cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from awaken_s3.providers.hints import MAX_RETRY_AFTER, parse_retry_after

NOW = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)


def http_date(delta: timedelta) -> str:
    return format_datetime(NOW + delta, usegmt=True)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "5"}, 5.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"Retry-After": " 12 "}, 12.0),
        ({"retry-after": "3600"}, 60.0),
        ({"retry-after": "-4"}, 0.0),
        ({"Retry-After": http_date(timedelta(seconds=30))}, 30.0),
        ({"Retry-After": http_date(timedelta(hours=2))}, 60.0),
        ({"Retry-After": http_date(timedelta(seconds=-30))}, 0.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "junk", "retry-after": "9"}, 9.0),
        ({"retry-after-ms": "600000"}, 60.0),
    ],
)
def test_hint_forms(headers: dict[str, str], expected: float) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


@pytest.mark.parametrize(
    "headers",
    [
        None,
        {},
        {"content-type": "application/json"},
        {"retry-after": "soon"},
        {"retry-after": "nan"},
        {"retry-after": "inf"},
        {"retry-after": ""},
    ],
)
def test_no_usable_hint_is_none(headers: dict[str, str] | None) -> None:
    assert parse_retry_after(headers, now=NOW) is None


@given(st.text(max_size=40))
def test_any_header_value_is_none_or_within_the_cap(value: str) -> None:
    result = parse_retry_after({"retry-after": value}, now=NOW)
    assert result is None or 0.0 <= result <= MAX_RETRY_AFTER
