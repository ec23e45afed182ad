"""State shared by the stream translators (pure): tool-call index normalisation.

Providers number tool calls differently (Anthropic and Bedrock use the content
block index, which counts text blocks too; OpenAI gives each call its own
index). The common events use a 0-based tool-call index in stream order.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from awaken_s3.messages import Message, TextBlock


class ToolCallIndexer:
    """Hands out 0-based tool-call indices in the order calls start."""

    __slots__ = ("_indices", "_open")

    def __init__(self) -> None:
        self._indices: dict[Hashable, int] = {}
        self._open: dict[Hashable, int] = {}

    def start(self, key: Hashable) -> int:
        index = len(self._indices)
        self._indices[key] = index
        self._open[key] = index
        return index

    def index_of(self, key: Hashable) -> int | None:
        return self._indices.get(key)

    def is_open(self, key: Hashable) -> bool:
        return key in self._open

    def end(self, key: Hashable) -> int | None:
        """Close the call at ``key``; ``None`` when it is not an open tool call."""
        return self._open.pop(key, None)

    def end_all(self) -> list[int]:
        """Close every open call, in index order."""
        indices = sorted(self._open.values())
        self._open.clear()
        return indices


def ends_with_assistant(messages: Sequence[Message]) -> bool:
    """Whether the request carries a prefill (a trailing assistant message)."""
    return bool(messages) and messages[-1].role == "assistant"


def rstrip_prefill(messages: Sequence[Message]) -> list[Message]:
    """Drop trailing whitespace from a trailing assistant message's last text block.

    Claude rejects a prefill that ends in whitespace; the model emits the space
    itself when it continues, and the runner checks the seam.
    """
    result = list(messages)
    if not ends_with_assistant(result):
        return result
    last = result[-1]
    blocks = list(last.content)
    if blocks and isinstance(blocks[-1], TextBlock):
        stripped = blocks[-1].text.rstrip()
        if stripped:
            blocks[-1] = TextBlock(text=stripped)
        else:
            blocks.pop()
    if blocks:
        result[-1] = Message(role="assistant", content=tuple(blocks))
    else:
        result.pop()
    return result
