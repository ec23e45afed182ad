"""Which worker the harness kills when: the kill points armed, and those a run has yet to reach.

:class:`KillSchedule` holds the points :meth:`Harness.kill_at <awaken_s3.testing.Harness.kill_at>`
armed (written to the harness directory, where the workers read them), hands them to the next
run started, and, each time the harness looks, kills the run's worker at every point its
worker reached once the run's checkpoint holds what the stream had sent there
(:func:`~awaken_s3.testing.kills.checkpoint_ready`). A point the run never reached fails the
test when the run ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from awaken_s3.models import StreamCheckpoint
from awaken_s3.testing.kills import KillPoint, checkpoint_ready, marker, reached, write_plan


@dataclass(frozen=True)
class Kill:
    point: KillPoint
    pids: tuple[int, ...]
    #: the run's checkpoint's text when its worker was killed
    partial_text: str


class KillSchedule:
    """The kill points of the harness in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._armed: list[KillPoint] = []
        #: kill points armed for the run they belong to, by index, not yet reached
        self._pending: dict[str, dict[int, KillPoint]] = {}
        self._kills: dict[str, list[Kill]] = {}

    def arm(self, points: tuple[KillPoint, ...]) -> None:
        """Arm ``points`` for the next run started (none: disarm), forgetting the markers of
        the points armed before."""
        for index in range(len(self._armed)):
            marker(self.directory, index).unlink(missing_ok=True)
        self._armed = list(points)
        write_plan(self.directory, self._armed)

    def started(self, run_id: str) -> None:
        """The armed points are this run's."""
        self._pending[run_id] = dict(enumerate(self._armed))

    def kill_where_reached(
        self,
        run_id: str,
        checkpoint: Callable[[], StreamCheckpoint | None],
        kill_workers: Callable[[], list[int]],
    ) -> None:
        """Kill the run's workers (``kill_workers``: the pids killed) at each point reached
        whose state ``checkpoint`` (the run's, read now) holds."""
        pending = self._pending.get(run_id, {})
        for index, point in list(pending.items()):
            hit, state = reached(self.directory, index)
            if not hit:
                continue
            found = checkpoint()
            if not checkpoint_ready(state, found):
                continue
            pids = kill_workers()
            if pids:
                text = found.partial_text if found is not None else ""
                self._kills.setdefault(run_id, []).append(Kill(point, tuple(pids), text))
                del pending[index]

    def ended(self, run_id: str) -> list[Kill]:
        """The run's kills, once it ended; disarms. Raises AssertionError when the run ended
        before one of its points."""
        unreached = self._pending.pop(run_id, {})
        self.arm(())  # disarmed: the next run passes every point
        if unreached:
            points = ", ".join(p.describe() for p in unreached.values())
            raise AssertionError(f"run {run_id} ended before its kill point: {points}")
        return self._kills.pop(run_id, [])
