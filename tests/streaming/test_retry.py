"""Retry policy: classification by type, full-jitter backoff, hints (rules 6, 7, 9)."""

from __future__ import annotations

import random

import pytest

from awaken_s3.streaming import errors as e
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.streaming.retry import (
    MAX_RETRY_AFTER,
    RetryPolicy,
    backoff_delay,
    classify,
    decide,
    hinted_delay,
)


class FixedRandom:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


RETRYABLE = [
    e.ConnectionDropped,
    e.ProviderUnreachable,
    e.StreamStalled,
    e.ServerError,
    e.Throttled,
    e.Overloaded,
]
PERMANENT = [
    e.InvalidRequest,
    e.PrefillRejected,
    e.AuthenticationFailed,
    e.ModelNotFound,
    e.ContextOverflow,
    e.ContentFiltered,
]


@pytest.mark.parametrize("cls", RETRYABLE)
def test_transient_failures_are_retryable(cls: type[e.ProviderError]) -> None:
    classified = classify(cls("boom"))
    assert classified.retryable
    assert classified.code == cls.code
    assert decide(RetryPolicy(), cls("boom"), interruptions=1, rng=FixedRandom(0.5)).retry


@pytest.mark.parametrize("cls", PERMANENT)
def test_permanent_failures_are_never_retried(cls: type[e.ProviderError]) -> None:
    decision = decide(RetryPolicy(), cls("nope", retry_after=1.0), interruptions=0)
    assert not decision.retry
    assert decision.error.code == cls.code
    assert not decision.error.retryable


def test_classification_ignores_message_text() -> None:
    # A permanent type saying "overloaded, retry" is still permanent, and vice versa.
    assert not classify(e.InvalidRequest("overloaded, please retry (529)")).retryable
    assert classify(e.ServerError("invalid request")).retryable


def test_an_unknown_exception_is_not_retried() -> None:
    decision = decide(RetryPolicy(), KeyError("x"), interruptions=1)
    assert not decision.retry
    assert decision.error.code == "unexpected_error"


def test_backoff_is_full_jitter_under_an_exponential_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=30.0)
    assert [backoff_delay(policy, n, FixedRandom(1.0)) for n in range(1, 8)] == [
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        30.0,
        30.0,
    ]
    assert backoff_delay(policy, 5, FixedRandom(0.0)) == 0.0
    rng = random.Random(3)
    delays = [backoff_delay(policy, 3, rng) for _ in range(200)]
    assert all(0.0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) > 100  # jittered, not a constant
    assert backoff_delay(policy, 10_000, FixedRandom(1.0)) == 30.0  # no overflow


def test_a_hint_is_honoured_when_present() -> None:
    decision = decide(
        RetryPolicy(),
        e.Throttled("slow down", retry_after=7.5),
        interruptions=1,
        rng=FixedRandom(1),
    )
    assert decision.retry and decision.delay == 7.5


def test_a_120s_hint_is_capped_at_60s() -> None:
    decision = decide(RetryPolicy(), e.Throttled("x", retry_after=120.0), interruptions=1)
    assert decision.delay == MAX_RETRY_AFTER == 60.0
    # A policy cannot lift the cap.
    assert hinted_delay(RetryPolicy(max_retry_after=600.0), 120.0) == 60.0
    assert hinted_delay(RetryPolicy(), -3.0) == 0.0


def test_without_a_hint_backoff_applies() -> None:
    policy = RetryPolicy(base_delay=0.5)
    assert hinted_delay(policy, None) is None
    decision = decide(policy, e.ServerError("500"), interruptions=2, rng=FixedRandom(1.0))
    assert decision.delay == 1.0


def test_the_budget_allows_max_interruptions_then_fails_naming_the_last_error() -> None:
    policy = RetryPolicy(max_interruptions=3)
    assert decide(policy, e.Overloaded("x"), interruptions=3, rng=FixedRandom(0)).retry
    decision = decide(policy, e.Overloaded("x"), interruptions=4, rng=FixedRandom(0))
    assert not decision.retry
    assert decision.error.code == "retry_budget_exhausted"
    assert "overloaded" in decision.error.message


REFUSED = "cannot connect to http://127.0.0.1:9/v1/chat/completions: connection refused"


def test_an_unreachable_endpoint_gets_fewer_retries_then_fails_with_its_own_error() -> None:
    policy = RetryPolicy(max_interruptions=5, max_unreachable=2)
    error = e.ProviderUnreachable(REFUSED)
    retried = [decide(policy, error, interruptions=n, rng=FixedRandom(1)) for n in (1, 2, 3)]
    assert [(d.retry, d.delay) for d in retried] == [(True, 1.0), (True, 2.0), (False, 0.0)]
    # The run fails with what to fix, not with "interrupted too many times".
    assert retried[-1].error == ClassifiedError("provider_unreachable", REFUSED, retryable=False)


def test_unreachable_retries_count_with_the_turns_other_interruptions() -> None:
    error = e.ProviderUnreachable(REFUSED)
    # After three drops, an endpoint that stopped answering fails the turn at once ...
    assert not decide(RetryPolicy(max_unreachable=2), error, interruptions=4).retry
    # ... and a budget smaller than max_unreachable still bounds it, with the same error.
    decision = decide(RetryPolicy(max_interruptions=1, max_unreachable=4), error, interruptions=2)
    assert (decision.retry, decision.error.code) == (False, "provider_unreachable")


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_interruptions=-1)
    with pytest.raises(ValueError):
        RetryPolicy(max_unreachable=-1)
    with pytest.raises(ValueError):
        RetryPolicy(idle_timeout=0)
