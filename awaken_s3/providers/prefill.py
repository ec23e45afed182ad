"""Which models accept a trailing assistant message (prefill), per model id (pure).

Defaults: Claude models of the 4.6 generation and later reject a trailing
assistant message on both the Anthropic API and Bedrock; older Claude models
accept it; OpenAI Chat Completions has no prefill at all. A model we cannot
recognise is assumed *not* to support it: the runner's fallback (assistant
prefix followed by a short "continue" user message) works everywhere, while a
wrong "yes" costs a permanent ``PrefillRejected``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, TypeAlias

#: ``True``/``False`` for every model, a per-model table (exact ids), or a
#: function returning ``None`` to fall back to the default.
PrefillOverride: TypeAlias = bool | Mapping[str, bool] | Callable[[str], bool | None] | None

#: The first Claude generation that rejects prefill.
NO_PREFILL_FROM: Final = (4, 6)

# New-style ids put the family first: claude-opus-4-6, claude-sonnet-4-5-20250929,
# claude-opus-4-20250514, us.anthropic.claude-opus-4-6-v1:0.
_FAMILY_FIRST = re.compile(r"claude-(?:opus|sonnet|haiku|mythos)-(\d+)(?:[-.](\d{1,2}))?(?!\d)")
# Old-style ids put the version first: claude-3-5-sonnet-20240620, claude-3-7-sonnet-latest,
# anthropic.claude-3-haiku-20240307-v1:0, claude-2.1.
_VERSION_FIRST = re.compile(r"claude-(\d+)(?:[-.](\d{1,2}))?(?!\d)")
# The oldest ids name no generation the other ways: claude-instant-v1 (the first),
# anthropic.claude-v2 (Claude 2 on Bedrock).
_OLDEST = re.compile(r"claude-(?:instant-v\d|v(\d+))")


def claude_generation(model: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a Claude model id, or ``None`` when it is not a Claude id of a
    family we know (a new family is not assumed to be old)."""
    lowered = model.lower()
    match = _FAMILY_FIRST.search(lowered) or _VERSION_FIRST.search(lowered)
    if match is None:
        oldest = _OLDEST.search(lowered)
        if oldest is None:
            return None
        return int(oldest.group(1) or 1), 0
    return int(match.group(1)), int(match.group(2) or 0)


def default_claude_prefill(model: str) -> bool:
    """The default for Claude-serving providers (Anthropic, Bedrock); an id we cannot
    place (a new family) defaults to no prefill, like any unknown model."""
    generation = claude_generation(model)
    if generation is None:
        return False
    return generation < NO_PREFILL_FROM


def resolve_prefill(model: str, override: PrefillOverride, default: Callable[[str], bool]) -> bool:
    """Apply a per-instance override, else the provider's default."""
    if isinstance(override, bool):
        return override
    if override is None:
        return default(model)
    if callable(override):
        answer = override(model)
        return default(model) if answer is None else answer
    if model in override:
        return override[model]
    return default(model)
