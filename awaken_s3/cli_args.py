"""Argument types for the command line: a value out of range is argparse's own one-line error
(``argument --port: must be ...``, exit status 2) before anything starts, never a traceback
from deep inside (``bind()``'s OverflowError, the event source's ValueError)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Final, TypeVar

MAX_PORT: Final = 65_535

_N = TypeVar("_N", int, float)


def _checked(text: str, kind: Callable[[str], _N], rule: str, ok: Callable[[_N], bool]) -> _N:
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or not ok(value):
        raise argparse.ArgumentTypeError(f"must be {rule}, not {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port: 0 (any free one) to 65535."""
    rule = f"a whole number from 0 to {MAX_PORT} (0: any free port)"
    return _checked(text, int, rule, lambda v: 0 <= v <= MAX_PORT)


def positive_int(text: str) -> int:
    """A count of at least 1."""
    return _checked(text, int, "a whole number of at least 1", lambda v: v >= 1)


def positive_seconds(text: str) -> float:
    """A duration above 0."""
    return _checked(text, float, "a number of seconds above 0", lambda v: v > 0)


def seconds_or_zero(text: str) -> float:
    """A duration of 0 or more."""
    return _checked(text, float, "a number of seconds, 0 or more", lambda v: v >= 0)
