"""Handler settings from the environment (storage settings live in awaken_s3.settings)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from awaken_s3.settings import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_VISIBILITY_MARGIN,
    SettingsError,
    positive_seconds,
)

DEFAULT_DEADLINE_MARGIN = 10.0
#: an invocation that made progress hands the run over instead of starting a model turn
#: this close to its deadline: a third of the default slice (120 s - 10 s), chosen by
#: measuring what cut turns cost (benchmarks/invocation_slicing.py, docs/DEPLOY.md)
DEFAULT_TURN_HEADROOM = 40.0
DEFAULT_MAX_IDLE_SUSPENSIONS = 5
DEFAULT_MAX_INTERRUPTIONS = 5
DEFAULT_MAX_RESCUES = 5


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise SettingsError(f"{name} must be a whole number, got {raw!r}") from exc
    if value < 1:
        raise SettingsError(f"{name} must be at least 1, got {raw!r}")
    return value


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    #: stop this many seconds before Lambda's deadline: the final checkpoint flush, the lease
    #: release and the continuation send must fit in it
    deadline_margin: float = DEFAULT_DEADLINE_MARGIN
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    #: the record being worked on stays invisible this much longer than the lease: a worker
    #: that dies without answering lets its record come back a little after its lease ran out
    visibility_margin: float = DEFAULT_VISIBILITY_MARGIN
    #: hand-overs in a row without progress after which a run fails with ``no_progress``
    max_idle_suspensions: int = DEFAULT_MAX_IDLE_SUSPENSIONS
    #: interruptions (dropped streams, stalls, throttling, lost processes) one model turn
    #: survives before the run fails with ``retry_budget_exhausted``
    max_interruptions: int = DEFAULT_MAX_INTERRUPTIONS
    #: seconds before the deadline after which no new model turn is started (once the
    #: invocation made progress): a turn cut at the deadline is resent with its thread
    turn_headroom: float = DEFAULT_TURN_HEADROOM

    @property
    def visibility_timeout(self) -> int:
        """Seconds of visibility the worker gives its record at the claim and each renewal."""
        return math.ceil(self.lease_seconds + self.visibility_margin)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WorkerSettings:
        env = os.environ if env is None else env
        return cls(
            deadline_margin=positive_seconds(
                env, "AWAKEN_DEADLINE_MARGIN_SECONDS", DEFAULT_DEADLINE_MARGIN
            ),
            lease_seconds=positive_seconds(env, "AWAKEN_LEASE_SECONDS", DEFAULT_LEASE_SECONDS),
            visibility_margin=positive_seconds(
                env, "AWAKEN_VISIBILITY_MARGIN_SECONDS", DEFAULT_VISIBILITY_MARGIN
            ),
            max_idle_suspensions=_count(
                env, "AWAKEN_MAX_IDLE_SUSPENSIONS", DEFAULT_MAX_IDLE_SUSPENSIONS
            ),
            max_interruptions=_count(env, "AWAKEN_MAX_INTERRUPTIONS", DEFAULT_MAX_INTERRUPTIONS),
            turn_headroom=positive_seconds(
                env, "AWAKEN_TURN_HEADROOM_SECONDS", DEFAULT_TURN_HEADROOM, zero=True
            ),
        )


@dataclass(frozen=True, slots=True)
class SweeperSettings:
    #: fruitless rescues (a worker took the run and committed nothing) after which the
    #: sweeper fails the run (``abandoned``); the grace comes from StorageSettings
    max_rescues: int = DEFAULT_MAX_RESCUES
    #: runs examined per pass (the next pass picks up the rest)
    batch: int = 100
    #: quiet checkpoints read per invocation to find those that outlived their runs (a
    #: random draw each time: none waits for good behind runs merely waiting in a queue)
    leftover_batch: int = 500
    #: rescue passes per invocation, ``pass_every`` seconds apart: a schedule cannot fire
    #: more often than once a minute, and what the queue lost waits for the next pass, so
    #: the deployed sweeper (template.yaml: 4 passes 15 s apart) looks every 15 s
    passes: int = 1
    pass_every: float = 15.0

    @property
    def period(self) -> float:
        """The longest wait between two passes when invoked every minute."""
        return max(self.pass_every, 60.0 - (self.passes - 1) * self.pass_every)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SweeperSettings:
        env = os.environ if env is None else env
        return cls(
            max_rescues=_count(env, "AWAKEN_SWEEP_MAX_RESCUES", DEFAULT_MAX_RESCUES),
            batch=_count(env, "AWAKEN_SWEEP_BATCH", 100),
            leftover_batch=_count(env, "AWAKEN_SWEEP_LEFTOVER_BATCH", 500),
            passes=_count(env, "AWAKEN_SWEEP_PASSES", 1),
            pass_every=positive_seconds(env, "AWAKEN_SWEEP_PASS_EVERY_SECONDS", 15.0),
        )


def allowed_models(env: Mapping[str, str] | None = None, *, default: str) -> frozenset[str]:
    """Models a caller may ask for: the configured default plus the optional comma-separated
    ``AWAKEN_ALLOWED_MODELS`` (a caller must not pick an arbitrary, possibly costly model)."""
    env = os.environ if env is None else env
    extra = {m.strip() for m in env.get("AWAKEN_ALLOWED_MODELS", "").split(",") if m.strip()}
    return frozenset({default, *extra})
