"""Handler settings from the environment (storage settings live in awaken_s3.settings)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from awaken_s3.settings import SettingsError

DEFAULT_DEADLINE_MARGIN = 10.0
DEFAULT_LEASE_SECONDS = 60.0
DEFAULT_BUSY_BASE_DELAY = 30.0


def _positive(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise SettingsError(f"{name} must be a number of seconds, got {raw!r}") from exc
    if value <= 0:
        raise SettingsError(f"{name} must be positive, got {raw!r}")
    return value


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    #: stop this many seconds before Lambda's deadline: the final checkpoint flush, the lease
    #: release and the continuation send must fit in it
    deadline_margin: float = DEFAULT_DEADLINE_MARGIN
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    #: first back-off step of a busy run's record (see awaken_s3.service.queue.busy_delay)
    busy_base_delay: float = DEFAULT_BUSY_BASE_DELAY

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WorkerSettings:
        env = os.environ if env is None else env
        return cls(
            deadline_margin=_positive(
                env, "AWAKEN_DEADLINE_MARGIN_SECONDS", DEFAULT_DEADLINE_MARGIN
            ),
            lease_seconds=_positive(env, "AWAKEN_LEASE_SECONDS", DEFAULT_LEASE_SECONDS),
            busy_base_delay=_positive(
                env, "AWAKEN_BUSY_BASE_DELAY_SECONDS", DEFAULT_BUSY_BASE_DELAY
            ),
        )


def allowed_models(env: Mapping[str, str] | None = None, *, default: str) -> frozenset[str]:
    """Models a caller may ask for: the configured default plus the optional comma-separated
    ``AWAKEN_ALLOWED_MODELS`` (a caller must not pick an arbitrary, possibly costly model)."""
    env = os.environ if env is None else env
    extra = {m.strip() for m in env.get("AWAKEN_ALLOWED_MODELS", "").split(",") if m.strip()}
    return frozenset({default, *extra})
