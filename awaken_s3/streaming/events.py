"""Provider-neutral stream events.

Plain frozen dataclasses (not pydantic): a turn has thousands of deltas and
these sit on the hot path. An in-stream error is not an event: the provider's
stream raises a typed :class:`~awaken_s3.streaming.errors.ProviderError`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    index: int
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """The provider closed the tool-call block at ``index``."""

    index: int


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """Token counts reported by the provider for the current stream so far.

    Counts are running totals, superseding earlier ones field by field (as
    Anthropic's ``message_start``/``message_delta`` report them): the runner keeps
    the maximum of each field within one stream and sums across streams (a resumed
    turn pays for every attempt). An adapter that only sees per-chunk increments
    must emit running totals.
    """

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class StopEvent:
    """The model ended the turn: ``end_turn``, ``tool_use``, ``max_tokens``, ``stop_sequence``."""

    stop_reason: str


StreamEvent = TextDelta | ToolCallStart | ToolCallDelta | ToolCallEnd | UsageEvent | StopEvent
