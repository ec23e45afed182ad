"""A thread's committed history, as every provider accepts it in a request (pure).

The thread keeps what happened, and some of what happens breaks the rules provider APIs hold
a conversation to:

* a run that failed (or was cancelled) before its model answered leaves the caller's message
  with no reply; the next run adds its own, and two user messages in a row reach the model
  (Bedrock Converse rejects that, and the thread could never be used again);
* a run that ended after its model asked for tools, before their results were committed (a
  step limit, a spent budget, a cancel), leaves tool calls without results, which Anthropic,
  OpenAI and Bedrock all reject;
* an empty completion committed before empty turns were given a notice
  (:func:`awaken_s3.streaming.recovery.never_empty`) left an assistant message with no
  content, or only blank text, which Anthropic and Bedrock reject anywhere but last.

:func:`request_messages` mends all three in the request only, never in the thread: a call
without a result gets an error result saying it never ran, a message with nothing to send is
left out, and consecutive user messages are sent as one (tool results first, as Anthropic
requires, then the rest in order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from awaken_s3.messages import ContentBlock, Message, TextBlock, ToolResultBlock

NOT_RUN: Final = "This tool call was not run: its run ended before the tools were called."


def _answered(message: Message | None) -> set[str]:
    if message is None or message.role != "user":
        return set()
    return {b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock)}


def _with_missing_results(history: Sequence[Message]) -> list[Message]:
    out: list[Message] = []
    for i, message in enumerate(history):
        out.append(message)
        if message.role != "assistant" or not message.tool_uses:
            continue
        following = history[i + 1] if i + 1 < len(history) else None
        if following is None:
            continue  # the run's own pending calls: the loop runs them before any request
        answered = _answered(following)
        missing = [call for call in message.tool_uses if call.id not in answered]
        if missing:
            out.append(
                Message(
                    role="user",
                    content=tuple(
                        ToolResultBlock(tool_use_id=call.id, content=NOT_RUN, is_error=True)
                        for call in missing
                    ),
                )
            )
    return out


def _says_something(message: Message) -> bool:
    """Whether ``message`` holds any block but blank text (the providers drop blank text, and
    refuse a message left with nothing)."""
    return any(not isinstance(b, TextBlock) or b.text.strip() for b in message.content)


def _merged(first: Message, second: Message) -> Message:
    blocks: list[ContentBlock] = [*first.content, *second.content]
    results = [b for b in blocks if isinstance(b, ToolResultBlock)]
    others = [b for b in blocks if not isinstance(b, ToolResultBlock)]
    return Message(role="user", content=(*results, *others))


def request_messages(history: Sequence[Message]) -> tuple[Message, ...]:
    """``history`` as a request may send it (see the module's docstring)."""
    out: list[Message] = []
    for message in _with_missing_results(history):
        if not _says_something(message):
            continue
        if out and out[-1].role == "user" and message.role == "user":
            out[-1] = _merged(out[-1], message)
        else:
            out.append(message)
    return tuple(out)
