"""What a completed model turn does to its run (pure).

| the turn                                   | the run                                      |
|--------------------------------------------|----------------------------------------------|
| has tool calls                             | goes on: the tools run next                  |
| stopped with ``pause_turn``                | goes on: the next turn re-sends the thread,  |
|                                            | which ends with the paused message, and the  |
|                                            | model continues it (as Anthropic documents)  |
| stopped with ``refusal``                   | fails with ``refusal``; the refused message  |
|                                            | (ending in the refusal) is committed with it |
| anything else                              | completes                                    |

A tool-use stop without a complete call never reaches the loop: the turn runner
treats it as an interruption (``tool_calls_lost``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from awaken_s3.failures import FailureCode
from awaken_s3.streaming.outcome import ClassifiedError, TurnCompleted, Usage
from awaken_s3.streaming.refusal import REFUSAL, refusal_of
from awaken_s3.threads.models import RunStatus

PAUSE_TURN: Final = "pause_turn"
BUDGET_EXHAUSTED: Final = FailureCode.BUDGET_EXHAUSTED
#: longest refusal text copied into the run's error record
MAX_ERROR_TEXT: Final = 1000


@dataclass(frozen=True, slots=True)
class TurnEnding:
    #: None: the run goes on
    final_status: RunStatus | None
    error: ClassifiedError | None = None


def turn_ending(turn: TurnCompleted) -> TurnEnding:
    if turn.message.tool_uses or turn.stop_reason == PAUSE_TURN:
        return TurnEnding(None)
    if turn.stop_reason == REFUSAL:
        text = refusal_of(turn.message)[:MAX_ERROR_TEXT]
        return TurnEnding(
            RunStatus.FAILED, ClassifiedError(FailureCode.REFUSAL, text, retryable=False)
        )
    return TurnEnding(RunStatus.COMPLETED)


def run_ending(turn: TurnCompleted, spent_before: Usage, budget: int | None) -> TurnEnding:
    """What committing ``turn`` does to its run, the token budget included: a turn that
    passed the run's budget is committed (it was paid for) and ends the run in the same
    write, so no tool of it runs and no turn follows."""
    ending = turn_ending(turn)
    if ending.final_status is None:
        spent = budget_error(spent_before + turn.usage, budget)
        if spent is not None:
            return TurnEnding(RunStatus.FAILED, spent)
    return ending


def tokens_spent(usage: Usage) -> int:
    """Every token a run was billed for: input (cached or not) and output."""
    return (
        usage.input_tokens
        + usage.cache_read_tokens
        + usage.cache_write_tokens
        + usage.output_tokens
    )


def budget_error(usage: Usage, budget: int | None) -> ClassifiedError | None:
    """The error that ends a run whose committed turns passed its token budget, or None."""
    if budget is None:
        return None
    spent = tokens_spent(usage)
    if spent <= budget:
        return None
    return ClassifiedError(
        BUDGET_EXHAUSTED,
        f"the run spent {spent} tokens, past its budget of {budget}",
        retryable=False,
    )
