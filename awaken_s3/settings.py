"""Where the durable records live, from the environment.

``AWAKEN_BUCKET`` (checkpoints and offloaded message bodies), ``AWAKEN_TABLE``
(threads and runs), ``AWAKEN_QUEUE_URL`` (continuations) and the optional
``AWAKEN_CHECKPOINT_PREFIX`` and ``AWAKEN_SWEEP_GRACE_SECONDS`` (how far past its due time
an undriven run's ``sweep_at`` is set: every writer of the table must agree on it).
Endpoints are botocore's business (``AWS_ENDPOINT_URL``): there is no endpoint setting here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

DEFAULT_CHECKPOINT_PREFIX = "checkpoints/"
#: how long past the moment a run should next have been driven the sweeper waits before it
#: re-sends the run: longer than a dead worker's record takes to come back by itself
#: (the lease plus the visibility margin), so the queue, not the sweeper, resumes crashes
DEFAULT_SWEEP_GRACE: Final = 120.0


class SettingsError(ValueError):
    """A required setting is missing or malformed."""


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
        raw_grace = env.get("AWAKEN_SWEEP_GRACE_SECONDS") or str(DEFAULT_SWEEP_GRACE)
        try:
            grace = float(raw_grace)
        except ValueError:
            grace = -1.0
        if not grace > 0:
            raise SettingsError(
                f"AWAKEN_SWEEP_GRACE_SECONDS must be a positive number of seconds, "
                f"got {raw_grace!r}"
            )
        return cls(
            bucket=env["AWAKEN_BUCKET"],
            table=env.get("AWAKEN_TABLE", ""),
            queue_url=env.get("AWAKEN_QUEUE_URL") or None,
            checkpoint_prefix=prefix,
            sweep_grace=grace,
        )
