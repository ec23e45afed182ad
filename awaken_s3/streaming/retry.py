"""Retry decisions: pure functions over typed errors, a policy and a random source.

Classification is by exception type (``awaken_s3.streaming.errors``), never by
message text. An exception that is not a :class:`ProviderError` is an adapter
bug or an unmapped failure: it is not retried, because retrying an unknown
failure can repeat a side effect or loop on a programming error.

An endpoint that no connection reached (:class:`ProviderUnreachable`) gets fewer retries
than other interruptions, and when they run out the run fails with that error itself (its
code, and a message naming the URL and the cause), not ``retry_budget_exhausted``: a wrong
base URL or a provider that is down is the user's to fix, and "interrupted too many times"
after half a minute of backoff would hide what to fix.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Final, Protocol

from awaken_s3.failures import FailureCode
from awaken_s3.streaming.errors import ProviderError, ProviderUnreachable
from awaken_s3.streaming.outcome import ClassifiedError

#: a provider's retry hint is never honoured beyond this (a broken or hostile hint must not
#: park a turn for hours)
MAX_RETRY_AFTER: Final = 60.0


class RandomSource(Protocol):
    def random(self) -> float: ...


@dataclass(frozen=True)
class RetryPolicy:
    #: interruptions a turn survives (in-process errors and resumes of a crashed
    #: attempt); the next one fails the turn with ``retry_budget_exhausted``
    max_interruptions: int = 5
    #: of those, how many may be an endpoint no connection reached (ProviderUnreachable);
    #: the next one fails the turn with that error. Two retries, at most 1 s + 2 s of
    #: backoff with the defaults, cover a local provider restarting
    max_unreachable: int = 2
    #: full-jitter backoff: uniform(0, min(max_delay, base_delay * 2**n)) for the n-th retry
    base_delay: float = 1.0
    max_delay: float = 30.0
    #: cap on a provider's retry hint; never above MAX_RETRY_AFTER
    max_retry_after: float = MAX_RETRY_AFTER
    #: a stream with no event for this long is abandoned as StreamStalled
    idle_timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.max_interruptions < 0 or self.max_unreachable < 0:
            raise ValueError("max_interruptions and max_unreachable must be >= 0")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must be >= 0")
        if self.idle_timeout <= 0:
            raise ValueError("idle_timeout must be > 0")


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    delay: float
    error: ClassifiedError


def classify(error: BaseException) -> ClassifiedError:
    if isinstance(error, ProviderError):
        return ClassifiedError(code=error.code, message=str(error), retryable=error.retryable)
    return ClassifiedError(
        code=FailureCode.UNEXPECTED_ERROR,
        message=f"{type(error).__name__}: {error}",
        retryable=False,
    )


def backoff_delay(policy: RetryPolicy, retry_number: int, rng: RandomSource) -> float:
    """Full jitter for the ``retry_number``-th retry (1-based)."""
    exponent = max(0, retry_number - 1)
    # Cap the exponent before the power: 2**exponent overflows a float past ~1024.
    ceiling = min(policy.max_delay, policy.base_delay * 2.0 ** min(exponent, 64))
    return rng.random() * ceiling


def hinted_delay(policy: RetryPolicy, retry_after: float | None) -> float | None:
    """The provider's hint, capped; ``None`` when the adapter supplied none."""
    if retry_after is None:
        return None
    cap = min(policy.max_retry_after, MAX_RETRY_AFTER)
    return min(max(0.0, retry_after), cap)


def decide(
    policy: RetryPolicy,
    error: BaseException,
    *,
    interruptions: int,
    rng: RandomSource | None = None,
) -> RetryDecision:
    """Whether to retry after ``error``, the ``interruptions``-th of this turn (1-based)."""
    classified = classify(error)
    if not classified.retryable:
        return RetryDecision(False, 0.0, classified)
    if isinstance(error, ProviderUnreachable) and interruptions > min(
        policy.max_unreachable, policy.max_interruptions
    ):
        # The run fails with the provider's own error: its message says what to fix.
        return RetryDecision(False, 0.0, dataclasses.replace(classified, retryable=False))
    if interruptions > policy.max_interruptions:
        return RetryDecision(False, 0.0, budget_exhausted(interruptions, classified.code))
    hint = hinted_delay(policy, error.retry_after if isinstance(error, ProviderError) else None)
    delay = (
        hint if hint is not None else backoff_delay(policy, interruptions, rng or random.Random())
    )
    return RetryDecision(True, delay, classified)


def budget_exhausted(interruptions: int, last_error: str | None) -> ClassifiedError:
    last = last_error or "unknown"
    return ClassifiedError(
        code=FailureCode.RETRY_BUDGET_EXHAUSTED,
        message=f"the turn was interrupted {interruptions} times; the last error was {last}",
        retryable=False,
    )
