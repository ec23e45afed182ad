"""Where the durable records live, from the environment.

``AWAKEN_BUCKET`` (checkpoints and offloaded message bodies), ``AWAKEN_TABLE``
(threads and runs), ``AWAKEN_QUEUE_URL`` (continuations) and the optional
``AWAKEN_CHECKPOINT_PREFIX`` and ``AWAKEN_SWEEP_GRACE_SECONDS`` (how far past its due time
an undriven run's ``sweep_at`` is set: every writer of the table must agree on it; by
default it is derived from ``AWAKEN_LEASE_SECONDS`` and ``AWAKEN_VISIBILITY_MARGIN_SECONDS``,
which every function of a deployment shares).
Endpoints are botocore's business (``AWS_ENDPOINT_URL``): there is no endpoint setting here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from awaken_s3.errors import AwakenError

DEFAULT_CHECKPOINT_PREFIX = "checkpoints/"
#: the run lease: how long a worker that dies without answering blocks its run
DEFAULT_LEASE_SECONDS: Final = 60.0
#: a worker keeps the record it works on hidden this much longer than its lease
DEFAULT_VISIBILITY_MARGIN: Final = 10.0


def derived_sweep_grace(lease_seconds: float, visibility_margin: float) -> float:
    """How long past the moment a run should next have been driven the sweeper waits before
    it re-sends the run (pure).

    A dead worker's own record comes back ``visibility_margin`` after its lease ran out, and
    its next delivery claims the run a receive, a cold start and one write later; a third of
    a lease more covers that (20 s with the defaults: Lambda's init is limited to 10 s), so
    the queue, not the sweeper, resumes crashes. Any longer only delays what the queue lost
    (a dead-lettered record, a lost continuation): the sweeper re-sends those at its first
    pass after the grace, which keeps them within three lease periods of the crash
    (docs/THREADS.md, "Recovery paths").
    """
    return visibility_margin + lease_seconds / 3


DEFAULT_SWEEP_GRACE: Final = derived_sweep_grace(DEFAULT_LEASE_SECONDS, DEFAULT_VISIBILITY_MARGIN)


class SettingsError(AwakenError, ValueError):
    """A required setting is missing or malformed."""


def positive_seconds(
    env: Mapping[str, str], name: str, default: float, *, zero: bool = False
) -> float:
    """``name`` from ``env`` as a positive number of seconds (``default`` when unset;
    ``zero``: 0 is allowed too)."""
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value > 0 or (zero and value == 0)):  # also NaN
        kind = "a number of seconds >= 0" if zero else "a positive number of seconds"
        raise SettingsError(f"{name} must be {kind}, got {raw!r}")
    return value


@dataclass(frozen=True, slots=True)
class StorageSettings:
    bucket: str
    table: str
    queue_url: str | None = None
    checkpoint_prefix: str = DEFAULT_CHECKPOINT_PREFIX
    sweep_grace: float = DEFAULT_SWEEP_GRACE

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        need_queue: bool = False,
        need_table: bool = True,
    ) -> StorageSettings:
        """``need_table=False``: for checkpoint-only work; ``table`` is then "" when unset."""
        env = os.environ if env is None else env
        required = ("AWAKEN_BUCKET", "AWAKEN_TABLE") if need_table else ("AWAKEN_BUCKET",)
        missing = [name for name in required if not env.get(name)]
        if need_queue and not env.get("AWAKEN_QUEUE_URL"):
            missing.append("AWAKEN_QUEUE_URL")
        if missing:
            raise SettingsError(f"set {', '.join(missing)} in the environment")
        prefix = env.get("AWAKEN_CHECKPOINT_PREFIX", DEFAULT_CHECKPOINT_PREFIX)
        # A prefix is a key *directory*: without the slash, "checkpoints" would
        # also list "checkpoints-old/...", and keys would read "checkpointsrun-1.json".
        if prefix and not prefix.endswith("/"):
            raise SettingsError(f"AWAKEN_CHECKPOINT_PREFIX must end with '/', got {prefix!r}")
        derived = derived_sweep_grace(
            positive_seconds(env, "AWAKEN_LEASE_SECONDS", DEFAULT_LEASE_SECONDS),
            positive_seconds(env, "AWAKEN_VISIBILITY_MARGIN_SECONDS", DEFAULT_VISIBILITY_MARGIN),
        )
        grace = positive_seconds(env, "AWAKEN_SWEEP_GRACE_SECONDS", derived)
        return cls(
            bucket=env["AWAKEN_BUCKET"],
            table=env.get("AWAKEN_TABLE", ""),
            queue_url=env.get("AWAKEN_QUEUE_URL") or None,
            checkpoint_prefix=prefix,
            sweep_grace=grace,
        )
