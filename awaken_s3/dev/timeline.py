"""What the dev server saw of each run: every writer (lease epoch) of its checkpoint and the
plan it resumed with (the checkpoint itself keeps only the latest), and its invocations.

:class:`CheckpointWatcher` looks at every checkpoint a few times a second through the
project's checkpoint store; :class:`Timelines` is what it and the event source record, read
by the console (any thread may call it).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Final

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.models import StoredCheckpoint
from awaken_s3.stores.s3 import S3StreamCheckpointStore

log = logging.getLogger("awaken_s3.dev")

#: seconds between two looks at the checkpoints
WATCH_INTERVAL: Final = 0.25
#: a new entry starts when one of these changes: a new writer (or plan) took over
_WRITER_KEY: Final = ("epoch", "writer", "turn", "resumed_with")


@dataclass
class RunTimeline:
    writers: list[dict[str, Any]] = field(default_factory=list)
    invocations: list[dict[str, Any]] = field(default_factory=list)


class Timelines:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, RunTimeline] = {}

    def invoked(self, run_id: str, invocation: dict[str, Any]) -> None:
        with self._lock:
            self._runs.setdefault(run_id, RunTimeline()).invocations.append(invocation)

    def saw(self, run_id: str, stored: StoredCheckpoint) -> None:
        checkpoint = stored.checkpoint
        entry = {
            "epoch": checkpoint.epoch,
            "writer": checkpoint.writer,
            "turn": checkpoint.turn,
            "resumed_with": checkpoint.resumed_with,
            "text_length_at_start": len(checkpoint.partial_text),
            "text_length_last": len(checkpoint.partial_text),
            "first_seen": time.time(),
            "version": stored.version,
        }
        with self._lock:
            writers = self._runs.setdefault(run_id, RunTimeline()).writers
            last = writers[-1] if writers else None
            if last is None or any(last[k] != entry[k] for k in _WRITER_KEY):
                writers.append(entry)
            else:
                last["version"] = stored.version
                last["text_length_last"] = entry["text_length_last"]

    def of(self, run_id: str) -> RunTimeline:
        """A copy of ``run_id``'s timeline."""
        with self._lock:
            timeline = self._runs.get(run_id, RunTimeline())
            return RunTimeline(
                [dict(w) for w in timeline.writers], [dict(i) for i in timeline.invocations]
            )


class CheckpointWatcher:
    """Notes every new writer of every checkpoint in ``store``, until cancelled."""

    def __init__(
        self, store: S3StreamCheckpointStore, timelines: Timelines, *, interval: float
    ) -> None:
        self.store = store
        self.timelines = timelines
        self.interval = interval

    async def look(self) -> None:
        async for run_id in self.store.list_run_ids():
            try:
                stored = await self.store.get(run_id)
            except StreamCheckpointError:
                continue  # corrupt, or deleted between the listing and the read
            if stored is not None:
                self.timelines.saw(run_id, stored)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.look()
            except Exception as exc:  # moto restarting, a network blip: look again later
                log.warning("checkpoint watcher: %s", exc)
