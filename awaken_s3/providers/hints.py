"""Retry hints from HTTP response headers (pure).

A hint is honoured only when the provider sent one, and never for longer than
:data:`MAX_RETRY_AFTER` seconds: a misbehaving or hostile header must not park
a run for hours.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

MAX_RETRY_AFTER: Final = 60.0


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _parse_seconds(text: str) -> float | None:
    try:
        seconds = float(text)
    except ValueError:
        return None
    # NaN and infinities parse as floats but are not delays.
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return seconds


def _parse_http_date(text: str, now: datetime) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        # RFC 9110 HTTP-dates are always GMT.
        when = when.replace(tzinfo=UTC)
    return (when - now).total_seconds()


def parse_retry_after(
    headers: Mapping[str, str] | None,
    *,
    now: datetime | None = None,
    cap: float = MAX_RETRY_AFTER,
) -> float | None:
    """Seconds to wait before retrying, or ``None`` when the provider gave no usable hint.

    Reads ``retry-after-ms`` (milliseconds, sent by the Anthropic and OpenAI APIs)
    first because it is more precise, then ``Retry-After`` as delta-seconds or an
    HTTP-date. A date in the past means "now" (0). The result is capped at ``cap``.
    """
    if not headers:
        return None
    seconds: float | None = None
    raw_ms = _header(headers, "retry-after-ms")
    if raw_ms is not None:
        millis = _parse_seconds(raw_ms.strip())
        if millis is not None:
            seconds = millis / 1000.0
    if seconds is None:
        raw = _header(headers, "retry-after")
        if raw is None:
            return None
        raw = raw.strip()
        seconds = _parse_seconds(raw)
        if seconds is None:
            seconds = _parse_http_date(raw, now or datetime.now(UTC))
    if seconds is None:
        return None
    return min(max(seconds, 0.0), cap)
