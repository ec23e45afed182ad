"""Reasoning and provider-only blocks of a turn: what is committed, what is reusable.

Decisions (each pinned by a table test in ``tests/streaming/test_reasoning.py``):

* A reasoning block is **reusable** (kept in a checkpoint, carried into a
  continuation prefix, put in a synthesised R2 turn) only when the provider closed
  it *and* it is authenticated: a thinking block with its signature, or redacted
  reasoning with its data. A signature arrives last, just before the block closes,
  so a cut anywhere inside a thinking block leaves it unsigned, and an unsigned
  block sent back is a 400. Unsigned reasoning is never a prefix.
* Reasoning never decides the plan on its own: a cut inside or right after a
  thinking block with no text after it plans as R4 (the carried block would only
  make the model think again), and a cut in text that follows a complete block is
  R1 with that block carried in front of the prefix.
* A prefix that carries reasoning goes out in the continue-message form: the APIs
  refuse an assistant prefill while thinking is on.
* A provider-only server tool call is reusable only together with its result
  (``id`` answered by a later block's ``tool_use_id``) and vice versa: a call
  without its result in a non-final message is refused. A completed turn commits
  them as received: a ``pause_turn`` message may end on a call, and that is how the
  provider wants it back.
* Order in a turn: these blocks in stream order, then the text, then the tool
  calls. Anthropic requires a message that holds thinking to start with it; text
  and server blocks are not interleaved (the whole text is one block).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from awaken_s3.messages import KeptBlock, ProviderBlock, RedactedThinkingBlock, ThinkingBlock
from awaken_s3.streaming.events import (
    ProviderBlockDone,
    ReasoningDelta,
    ReasoningEnd,
    RedactedReasoning,
)

KeptEvent = ReasoningDelta | RedactedReasoning | ReasoningEnd | ProviderBlockDone
KEPT_EVENTS = (ReasoningDelta, RedactedReasoning, ReasoningEnd, ProviderBlockDone)


def is_reusable_reasoning(block: KeptBlock) -> bool:
    if isinstance(block, ThinkingBlock):
        return block.signed
    if isinstance(block, RedactedThinkingBlock):
        return bool(block.data)
    return True


def reusable_blocks(blocks: Iterable[KeptBlock]) -> tuple[KeptBlock, ...]:
    """The blocks a continuation or a synthesised turn may carry, in their order."""
    kept = [b for b in blocks if is_reusable_reasoning(b)]
    calls: set[str] = set()
    answered: set[str] = set()
    for block in kept:
        if isinstance(block, ProviderBlock):
            call_id, answers = _call_id(block), _answers(block)
            if call_id is not None:
                calls.add(call_id)
            if answers is not None:
                answered.add(answers)
    result: list[KeptBlock] = []
    for block in kept:
        if isinstance(block, ProviderBlock):
            call_id, answers = _call_id(block), _answers(block)
            if call_id is not None and call_id not in answered:
                continue
            if answers is not None and answers not in calls:
                continue
        result.append(block)
    return tuple(result)


def carries_reasoning(blocks: Iterable[KeptBlock]) -> bool:
    return any(isinstance(b, ThinkingBlock | RedactedThinkingBlock) for b in blocks)


def _call_id(block: ProviderBlock) -> str | None:
    kind = block.block.get("type")
    value = block.block.get("id")
    if isinstance(kind, str) and kind.endswith("tool_use") and isinstance(value, str):
        return value
    return None


def _answers(block: ProviderBlock) -> str | None:
    value = block.block.get("tool_use_id")
    return value if isinstance(value, str) else None


@dataclass
class _Reasoning:
    redacted: bool = False
    closed: bool = False
    text: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    data: list[str] = field(default_factory=list)

    def block(self) -> ThinkingBlock | RedactedThinkingBlock | None:
        if self.redacted:
            data = "".join(self.data)
            return RedactedThinkingBlock(data=data) if data else None
        return ThinkingBlock(thinking="".join(self.text), signature="".join(self.signature))


class KeptBlocks:
    """The reasoning and provider blocks of one turn, in stream order.

    Carried blocks (from a plan) come first and are complete; the blocks of the
    current attempt follow, keyed by the stream's own reasoning index, which every
    attempt starts from 0.
    """

    __slots__ = ("_open", "_slots")

    def __init__(self) -> None:
        self._slots: list[_Reasoning | KeptBlock] = []
        self._open: dict[int, _Reasoning] = {}

    def restart(self, carried: Sequence[KeptBlock] = ()) -> None:
        self._slots = list(carried)
        self._open = {}

    def apply(self, event: KeptEvent) -> bool:
        """Fold one event; True at a block boundary (a block became complete)."""
        if isinstance(event, ProviderBlockDone):
            self._slots.append(ProviderBlock(provider=event.provider, block=dict(event.block)))
            return True
        state = self._open.get(event.index)
        if state is None:
            state = self._open[event.index] = _Reasoning()
            self._slots.append(state)
        if isinstance(event, ReasoningEnd):
            state.closed = True
            return True
        if state.closed:
            return False
        if isinstance(event, RedactedReasoning):
            state.redacted = True
            state.data.append(event.data)
        else:
            if event.text:
                state.text.append(event.text)
            if event.signature:
                state.signature.append(event.signature)
        return False

    def committed(self) -> tuple[KeptBlock, ...]:
        """Every block of the turn, for a turn the provider finished."""
        blocks: list[KeptBlock] = []
        for slot in self._slots:
            block = slot.block() if isinstance(slot, _Reasoning) else slot
            if block is not None:
                blocks.append(block)
        return tuple(blocks)

    def reusable(self) -> tuple[KeptBlock, ...]:
        """The blocks a checkpoint keeps: closed, authenticated, server calls paired."""
        blocks: list[KeptBlock] = []
        for slot in self._slots:
            if isinstance(slot, _Reasoning):
                block = slot.block() if slot.closed else None
                if block is None:
                    continue
                blocks.append(block)
            else:
                blocks.append(slot)
        return reusable_blocks(blocks)
