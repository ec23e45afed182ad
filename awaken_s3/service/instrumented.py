"""A turn runner wrapper that records what each turn did, for metrics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from awaken_s3.runtime.loop import TurnRunnerLike
from awaken_s3.streaming.outcome import CheckpointStats, TurnCompleted, TurnOutcome
from awaken_s3.streaming.turn_request import TurnRequest


@dataclass
class TurnTally:
    """Totals over the turns one invocation ran (committed or not)."""

    plans: Counter[str] = field(default_factory=Counter)
    checkpoint_puts: int = 0
    checkpoint_failures: int = 0
    checkpoint_fenced: int = 0
    checkpoint_load_failures: int = 0
    checkpoint_bytes: int = 0
    #: lost conditions that turned out not to be a newer owner (the object was replaced)
    checkpoint_repaired: int = 0
    #: checkpoints a newer build wrote, left alone
    checkpoint_newer_schema: int = 0

    def add(self, outcome: TurnOutcome) -> None:
        if isinstance(outcome, TurnCompleted) and outcome.plan_kind is not None:
            self.plans[outcome.plan_kind] += 1
        stats: CheckpointStats = outcome.checkpoint_stats
        self.checkpoint_puts += stats.puts
        self.checkpoint_failures += stats.failures
        self.checkpoint_fenced += stats.fenced
        self.checkpoint_load_failures += stats.load_failures
        self.checkpoint_bytes += stats.bytes
        self.checkpoint_repaired += stats.repaired
        self.checkpoint_newer_schema += stats.newer_schema


@dataclass
class InstrumentedRunner:
    runner: TurnRunnerLike
    tally: TurnTally = field(default_factory=TurnTally)

    async def run_turn(self, turn: TurnRequest) -> TurnOutcome:
        outcome = await self.runner.run_turn(turn)
        self.tally.add(outcome)
        return outcome
