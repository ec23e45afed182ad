"""A turn runner wrapper that records what each turn did, for metrics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from awaken_s3.runtime.loop import TurnRunnerLike
from awaken_s3.streaming.outcome import CheckpointStats, TurnCompleted, TurnOutcome
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.runner import NOT_LOADED


@dataclass
class TurnTally:
    """Totals over the turns one invocation ran (committed or not)."""

    plans: Counter[str] = field(default_factory=Counter)
    checkpoint_puts: int = 0
    checkpoint_failures: int = 0
    checkpoint_fenced: int = 0
    checkpoint_load_failures: int = 0
    checkpoint_bytes: int = 0

    def add(self, outcome: TurnOutcome) -> None:
        if isinstance(outcome, TurnCompleted) and outcome.plan_kind is not None:
            self.plans[outcome.plan_kind] += 1
        stats: CheckpointStats = outcome.checkpoint_stats
        self.checkpoint_puts += stats.puts
        self.checkpoint_failures += stats.failures
        self.checkpoint_fenced += stats.fenced
        self.checkpoint_load_failures += stats.load_failures
        self.checkpoint_bytes += stats.bytes


@dataclass
class InstrumentedRunner:
    runner: TurnRunnerLike
    tally: TurnTally = field(default_factory=TurnTally)

    async def run_turn(
        self,
        *,
        run_id: str,
        thread_id: str,
        turn: int,
        epoch: int,
        request: ModelRequest,
        deadline: float | None = None,
        existing: Any = NOT_LOADED,
    ) -> TurnOutcome:
        outcome = await self.runner.run_turn(
            run_id=run_id,
            thread_id=thread_id,
            turn=turn,
            epoch=epoch,
            request=request,
            deadline=deadline,
            existing=existing,
        )
        self.tally.add(outcome)
        return outcome
