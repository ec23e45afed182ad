"""The R1-R4 recovery planner: a pure function of a saved checkpoint.

| plan | saved content                                   | what happens                         |
|------|-------------------------------------------------|--------------------------------------|
| R1   | text only                                       | continue from the text (prefix)      |
| R2   | at least one complete tool call                 | no model call: synthesize the turn   |
| R3   | text plus only unclosed / malformed tool calls  | drop those calls, continue as in R1  |
| R4   | nothing reusable                                | restart with no prefix               |

Decisions:

* Text made only of whitespace is not reusable text. It carries no content, and
  providers that accept a prefill reject an assistant prefix ending in
  whitespace; such a checkpoint plans as R4 (or R2 when a call is complete).
* A call is complete when its raw arguments parse as a JSON *object*; an empty
  argument string counts as ``{}`` only when the provider closed the block.
  Parsing, not the closed flag, decides: a closed block whose text is not an
  object is dropped. A call without a name or id cannot be executed or answered
  and is dropped too.
* Reasoning and server-tool blocks never decide the plan; the reusable ones
  (:mod:`awaken_s3.streaming.reasoning`) ride along with R1-R3 and are dropped by R4.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from awaken_s3.messages import (
    ContentBlock,
    KeptBlock,
    Message,
    ProviderBlock,
    TextBlock,
    ToolUseBlock,
)
from awaken_s3.models import PartialToolCall, StreamCheckpoint
from awaken_s3.streaming.outcome import DroppedToolCall
from awaken_s3.streaming.reasoning import reusable_blocks

PlanKind = Literal["R1", "R2", "R3", "R4"]


@dataclass(frozen=True)
class RecoveryPlan:
    kind: PlanKind
    #: the reusable text ("" for R4); for R2 the text of the synthesized turn
    prefix_text: str
    #: complete calls, parsed, in stream order (non-empty only for R2)
    tool_calls: tuple[ToolUseBlock, ...]
    #: every incomplete or malformed call, in stream order
    dropped: tuple[DroppedToolCall, ...]
    #: reusable reasoning and server-tool blocks carried in front of the text (not for R4)
    blocks: tuple[KeptBlock, ...] = ()

    @property
    def needs_model_call(self) -> bool:
        return self.kind != "R2"


def parse_tool_call(call: PartialToolCall) -> ToolUseBlock | DroppedToolCall:
    """Decide one call: a ToolUseBlock when complete, else why it is dropped."""

    def dropped(reason: str) -> DroppedToolCall:
        return DroppedToolCall(index=call.index, id=call.id, name=call.name, reason=reason)

    if not call.name or not call.id:
        return dropped("missing tool name or id")
    raw = call.arguments
    if not raw.strip():
        if call.closed:
            return ToolUseBlock(id=call.id, name=call.name, input={})
        return dropped("no arguments and the block was never closed")
    try:
        parsed: Any = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        reason = "arguments are not valid JSON" if call.closed else "arguments are incomplete JSON"
        return dropped(reason)
    if not isinstance(parsed, dict):
        return dropped(f"arguments are a JSON {type(parsed).__name__}, not an object")
    return ToolUseBlock(id=call.id, name=call.name, input=parsed)


def split_tool_calls(
    calls: Iterable[PartialToolCall],
) -> tuple[tuple[ToolUseBlock, ...], tuple[DroppedToolCall, ...]]:
    """Complete and dropped calls, each in stream (index) order."""
    complete: list[ToolUseBlock] = []
    dropped: list[DroppedToolCall] = []
    for call in sorted(calls, key=lambda c: c.index):
        decided = parse_tool_call(call)
        if isinstance(decided, ToolUseBlock):
            complete.append(decided)
        else:
            dropped.append(decided)
    return tuple(complete), tuple(dropped)


def has_reusable_text(text: str) -> bool:
    return bool(text.strip())


def plan_recovery(checkpoint: StreamCheckpoint) -> RecoveryPlan:
    complete, dropped = split_tool_calls(checkpoint.tool_calls)
    text = checkpoint.partial_text
    reusable = has_reusable_text(text)
    blocks = reusable_blocks(checkpoint.reusable_blocks)
    if complete:
        return RecoveryPlan("R2", text if reusable else "", complete, dropped, blocks)
    if reusable:
        return RecoveryPlan("R3" if dropped else "R1", text, (), dropped, blocks)
    return RecoveryPlan("R4", "", (), dropped)


def synthesized_turn(plan: RecoveryPlan) -> Message:
    """The complete tool-use turn of an R2 plan: saved text, then every complete call."""
    if plan.kind != "R2":
        raise ValueError(f"only an R2 plan synthesizes a turn, not {plan.kind}")
    return assemble_turn(plan.prefix_text, plan.tool_calls, leading=plan.blocks)


def assemble_turn(
    text: str, tool_calls: Iterable[ToolUseBlock], *, leading: Iterable[KeptBlock] = ()
) -> Message:
    """An assistant message: reasoning and server blocks, the text (when there is any),
    then the tool calls."""
    blocks: list[ContentBlock] = list(leading)
    if text:
        blocks.append(TextBlock(text=text))
    blocks.extend(tool_calls)
    return Message(role="assistant", content=tuple(blocks))


#: the text an empty turn is committed with (see :func:`never_empty`)
EMPTY_TURN_NOTICE: Final = "The model returned an empty response."


def never_empty(message: Message) -> Message:
    """``message``, or, when it says nothing a request could carry (no text that shows, no
    tool call, no server block: an empty completion), its reasoning followed by
    :data:`EMPTY_TURN_NOTICE`.

    Anthropic and Bedrock refuse a request holding an assistant message whose content is
    empty or only blank text; committed as it came, such a turn would fail every later run of
    its thread. A notice in its place keeps one committed message per model turn, so the
    commit, its idempotency and the followers' ``turn_committed`` stay as for any turn.
    """
    if any(
        isinstance(block, ToolUseBlock | ProviderBlock)
        or (isinstance(block, TextBlock) and block.text.strip())
        for block in message.content
    ):
        return message
    kept = tuple(block for block in message.content if not isinstance(block, TextBlock))
    return Message(role=message.role, content=(*kept, TextBlock(text=EMPTY_TURN_NOTICE)))
