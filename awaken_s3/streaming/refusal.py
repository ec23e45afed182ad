"""A refused turn's message (pure).

OpenAI streams the refusal as text of its own (``delta.refusal``); Anthropic only
stops with ``stop_reason: refusal`` after whatever text it had streamed, and adds no
words. Either way the committed message ends with a text block saying so, so the
refusal is visible in the thread and the message is never empty (an empty assistant
message is a 400 on the next request).
"""

from __future__ import annotations

from typing import Final

from awaken_s3.messages import Message, TextBlock

REFUSAL: Final = "refusal"
REFUSAL_NOTICE: Final = "The model declined to continue this response (stop reason: refusal)."


def with_refusal(message: Message, refusal_text: str) -> Message:
    """``message`` followed by the refusal: the provider's words, or the notice."""
    block = TextBlock(text=refusal_text if refusal_text.strip() else REFUSAL_NOTICE)
    return Message(role=message.role, content=(*message.content, block))


def refusal_of(message: Message) -> str:
    """The refusal of a message built by :func:`with_refusal` (its last text block)."""
    for block in reversed(message.content):
        if isinstance(block, TextBlock):
            return block.text
    return REFUSAL_NOTICE
