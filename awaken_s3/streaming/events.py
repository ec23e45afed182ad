"""Provider-neutral stream events.

Plain frozen dataclasses (not pydantic): a turn has thousands of deltas and
these sit on the hot path. An in-stream error is not an event: the provider's
stream raises a typed :class:`~awaken_s3.streaming.errors.ProviderError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
    #: prompt tokens read from / written to the provider's prompt cache (not in ``input_tokens``)
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class StopEvent:
    """The model ended the turn: ``end_turn``, ``tool_use``, ``max_tokens``, ``stop_sequence``,
    ``refusal``, ``pause_turn`` or ``other``."""

    stop_reason: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A fragment of reasoning block ``index`` (0-based, in stream order): its text,
    its signature, or neither (the block opened)."""

    index: int
    text: str = ""
    signature: str = ""


@dataclass(frozen=True, slots=True)
class RedactedReasoning:
    """Encrypted reasoning for block ``index``: opaque data, appended as received."""

    index: int
    data: str


@dataclass(frozen=True, slots=True)
class ReasoningEnd:
    """The provider closed reasoning block ``index``."""

    index: int


@dataclass(frozen=True, slots=True)
class ProviderBlockDone:
    """A complete provider-only block (an Anthropic server tool call or result)."""

    provider: str
    block: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RefusalDelta:
    """Refusal text (OpenAI ``delta.refusal``): the model declined instead of answering."""

    text: str


StreamEvent = (
    TextDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | UsageEvent
    | StopEvent
    | ReasoningDelta
    | RedactedReasoning
    | ReasoningEnd
    | ProviderBlockDone
    | RefusalDelta
)
