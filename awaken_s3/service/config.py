"""Handler settings from the environment (storage settings live in awaken_s3.settings), each
concern one pydantic-settings model: the worker, the sweeper, the API."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator
from pydantic_settings import NoDecode

from awaken_s3.settings import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_VISIBILITY_MARGIN,
    Count,
    EnvSettings,
    Seconds,
    SecondsOrZero,
    env,
)

DEFAULT_DEADLINE_MARGIN = 10.0
#: an invocation that made progress hands the run over instead of starting a model turn
#: this close to its deadline: a third of the default slice (120 s - 10 s), chosen by
#: measuring what cut turns cost (benchmarks/invocation_slicing.py, docs/DEPLOY.md)
DEFAULT_TURN_HEADROOM = 40.0
DEFAULT_MAX_IDLE_SUSPENSIONS = 5
DEFAULT_MAX_INTERRUPTIONS = 5
DEFAULT_MAX_RESCUES = 5


class WorkerSettings(EnvSettings):
    #: stop this many seconds before Lambda's deadline: the final checkpoint flush, the lease
    #: release and the continuation send must fit in it
    deadline_margin: Seconds = env("AWAKEN_DEADLINE_MARGIN_SECONDS", DEFAULT_DEADLINE_MARGIN)
    lease_seconds: Seconds = env("AWAKEN_LEASE_SECONDS", DEFAULT_LEASE_SECONDS)
    #: the record being worked on stays invisible this much longer than the lease: a worker
    #: that dies without answering lets its record come back a little after its lease ran out
    visibility_margin: Seconds = env("AWAKEN_VISIBILITY_MARGIN_SECONDS", DEFAULT_VISIBILITY_MARGIN)
    #: hand-overs in a row without progress after which a run fails with ``no_progress``
    max_idle_suspensions: Count = env("AWAKEN_MAX_IDLE_SUSPENSIONS", DEFAULT_MAX_IDLE_SUSPENSIONS)
    #: interruptions (dropped streams, stalls, throttling, lost processes) one model turn
    #: survives before the run fails with ``retry_budget_exhausted``
    max_interruptions: Count = env("AWAKEN_MAX_INTERRUPTIONS", DEFAULT_MAX_INTERRUPTIONS)
    #: seconds before the deadline after which no new model turn is started (once the
    #: invocation made progress): a turn cut at the deadline is resent with its thread
    turn_headroom: SecondsOrZero = env("AWAKEN_TURN_HEADROOM_SECONDS", DEFAULT_TURN_HEADROOM)

    @property
    def visibility_timeout(self) -> int:
        """Seconds of visibility the worker gives its record at the claim and each renewal."""
        return math.ceil(self.lease_seconds + self.visibility_margin)


class SweeperSettings(EnvSettings):
    #: fruitless rescues (a worker took the run and committed nothing) after which the
    #: sweeper fails the run (``abandoned``); the grace comes from StorageSettings
    max_rescues: Count = env("AWAKEN_SWEEP_MAX_RESCUES", DEFAULT_MAX_RESCUES)
    #: runs examined per pass (the next pass picks up the rest)
    batch: Count = env("AWAKEN_SWEEP_BATCH", 100)
    #: quiet checkpoints read per invocation to find those that outlived their runs (a
    #: random draw each time: none waits for good behind runs merely waiting in a queue)
    leftover_batch: Count = env("AWAKEN_SWEEP_LEFTOVER_BATCH", 500)
    #: rescue passes per invocation, ``pass_every`` seconds apart: a schedule cannot fire
    #: more often than once a minute, and what the queue lost waits for the next pass, so
    #: the deployed sweeper (template.yaml: 4 passes 15 s apart) looks every 15 s
    passes: Count = env("AWAKEN_SWEEP_PASSES", 1)
    pass_every: Seconds = env("AWAKEN_SWEEP_PASS_EVERY_SECONDS", 15.0)

    @property
    def period(self) -> float:
        """The longest wait between two passes when invoked every minute."""
        return max(self.pass_every, 60.0 - (self.passes - 1) * self.pass_every)


def _model_list(raw: Any) -> frozenset[str]:
    names = raw.split(",") if isinstance(raw, str) else raw
    return frozenset(name.strip() for name in names if name.strip())


class ApiSettings(EnvSettings):
    #: models a caller may ask for besides an agent's default: a caller must not pick an
    #: arbitrary, possibly costly model (comma-separated)
    allowed_models: Annotated[frozenset[str], NoDecode, BeforeValidator(_model_list)] = env(
        "AWAKEN_ALLOWED_MODELS", frozenset()
    )
    #: a cancel marks the run's checkpoint, so the worker streaming it stops at its next put
    #: instead of its next lease renewal (off only to measure the renewal alone)
    cancel_signal: bool = env("AWAKEN_CANCEL_SIGNAL", True)


def allowed_models(environ: Mapping[str, str] | None = None, *, default: str) -> frozenset[str]:
    """Models a caller may ask for: the configured default plus ``AWAKEN_ALLOWED_MODELS``."""
    return frozenset(
        {default, *ApiSettings.from_env(os.environ if environ is None else environ).allowed_models}
    )
