"""What a caller's own loop sees of a turn while it streams: events with offsets (pure).

The provider's raw events are not what a user interface should show: a resumed turn joins a
continuation to a saved prefix at a checked seam (an echo of the prefix is trimmed, a tail
that may still turn out to be an echo is held back), an interruption can drop tool calls
whose arguments never completed, and reasoning of a cut attempt can be dropped. These events
are the turn as it will be committed:

* :class:`TurnResumed` comes first when the turn continues from a checkpoint (and again after
  an interruption within the call): its ``text`` is the whole turn so far, so a view replaces
  what it shows with it; everything after extends it.
* :class:`TextChunk` is decided text only: ``offset`` is where it starts in the whole turn's
  text, so ``offset == len(text shown)`` holds for every chunk. Text that is only whitespace
  is held until something else follows (a plan never reuses it, so showing it could mean
  taking it back).
* :class:`ToolCallStarted` and :class:`ToolCallChunk` (argument fragments, ``offset`` in
  that call's arguments) are for display: an interruption can still drop the call (the next
  :class:`TurnResumed` lists it in ``dropped``). :class:`ToolCallReady` is final: a call
  whose arguments parse as a complete JSON object is never dropped.
* :class:`ReasoningChunk` is reasoning text of block ``index`` of the current attempt.

:class:`TurnEventView` derives them from the accumulator after each raw event; the runner
calls it (see ``TurnRunner.run_turn(observer=...)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from awaken_s3.messages import KeptBlock, Message, ToolUseBlock
from awaken_s3.streaming.accumulator import StreamAccumulator
from awaken_s3.streaming.events import (
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from awaken_s3.streaming.outcome import DroppedToolCall
from awaken_s3.streaming.recovery import PlanKind, has_reusable_text, parse_tool_call
from awaken_s3.streaming.turn_machine import Resume


@dataclass(frozen=True, slots=True)
class TurnResumed:
    """The turn continues from a saved partial: show ``text`` (the whole turn so far) now."""

    plan: PlanKind
    text: str
    #: the complete tool calls of an R2 plan (the turn ends with them, no model call)
    tool_calls: tuple[ToolUseBlock, ...]
    #: incomplete or malformed calls that were dropped and will never run
    dropped: tuple[DroppedToolCall, ...]
    #: complete reasoning (and server-tool) blocks carried in front of the text
    blocks: tuple[KeptBlock, ...]
    #: interruptions counted so far
    retry_count: int
    #: True: from a checkpoint found at the start (an earlier process's); False: after an
    #: interruption within this call
    from_checkpoint: bool


@dataclass(frozen=True, slots=True)
class TextChunk:
    text: str
    #: where ``text`` starts in the whole turn's text
    offset: int


@dataclass(frozen=True, slots=True)
class ReasoningChunk:
    #: reasoning block of the current attempt (0-based, in stream order)
    index: int
    text: str
    #: where ``text`` starts in that block's reasoning
    offset: int


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    index: int
    arguments: str
    #: where ``arguments`` starts in that call's raw argument text
    offset: int


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """A tool call whose arguments parse as a complete JSON object: it will be committed."""

    index: int
    call: ToolUseBlock


TurnEvent = (
    TurnResumed | TextChunk | ReasoningChunk | ToolCallStarted | ToolCallChunk | ToolCallReady
)

Observer = Callable[[TurnEvent], None]


class TurnEventView:
    """Turns what the accumulator decided into :data:`TurnEvent` s for an observer."""

    def __init__(self, observer: Observer) -> None:
        self._emit = observer
        self._text_sent = 0
        self._text_held = True
        self._arguments_sent: dict[int, int] = {}
        self._reasoning_sent: dict[int, int] = {}
        self._ready: set[str] = set()

    def applied(self, event: StreamEvent, acc: StreamAccumulator) -> None:
        """``event`` was just folded into ``acc``."""
        if isinstance(event, TextDelta):
            self._text(acc, event.text)
        elif isinstance(event, ToolCallDelta):
            if event.arguments:
                offset = self._arguments_sent.get(event.index, 0)
                self._arguments_sent[event.index] = offset + len(event.arguments)
                self._emit(ToolCallChunk(event.index, event.arguments, offset))
        elif isinstance(event, ToolCallStart):
            call = acc.tool_call(event.index)
            if call is not None:
                self._emit(ToolCallStarted(event.index, call.id, call.name))
        elif isinstance(event, ToolCallEnd):
            call = acc.tool_call(event.index)
            if call is not None:
                decided = parse_tool_call(call)
                if isinstance(decided, ToolUseBlock):
                    self._announce(event.index, decided)
        elif isinstance(event, ReasoningDelta) and event.text:
            offset = self._reasoning_sent.get(event.index, 0)
            self._reasoning_sent[event.index] = offset + len(event.text)
            self._emit(ReasoningChunk(event.index, event.text, offset))

    def resumed(self, resume: Resume, *, retry_count: int) -> None:
        """A plan was taken (the accumulator already starts from its prefix)."""
        plan = resume.plan
        text = plan.prefix_text
        self._text_held = not has_reusable_text(text)
        self._text_sent = 0 if self._text_held else len(text)
        self._arguments_sent.clear()
        self._reasoning_sent.clear()
        self._ready = {call.id for call in plan.tool_calls}
        self._emit(
            TurnResumed(
                plan=plan.kind,
                text="" if self._text_held else text,
                tool_calls=plan.tool_calls,
                dropped=plan.dropped,
                blocks=plan.blocks,
                retry_count=retry_count,
                from_checkpoint=resume.from_checkpoint,
            )
        )

    def completed(self, message: Message) -> None:
        """The turn ended with ``message``: send what was still held back, and every
        complete call not announced yet."""
        text = message.text
        if len(text) > self._text_sent:
            self._emit(TextChunk(text[self._text_sent :], self._text_sent))
            self._text_sent = len(text)
        for index, call in enumerate(message.tool_uses):
            self._announce(index, call)

    # -- helpers -------------------------------------------------------------------------

    def _text(self, acc: StreamAccumulator, delta: str) -> None:
        length = acc.text_length
        if length <= self._text_sent:
            return
        if self._text_held:
            if not has_reusable_text(acc.text):
                return
            self._text_held = False
        if not self._text_held and length - len(delta) == self._text_sent and delta:
            # The common case: the seam is closed and the delta is exactly the new text.
            chunk = delta
        else:
            chunk = acc.text[self._text_sent :]
        self._emit(TextChunk(chunk, self._text_sent))
        self._text_sent = length

    def _announce(self, index: int, call: ToolUseBlock) -> None:
        if call.id in self._ready:
            return
        self._ready.add(call.id)
        self._emit(ToolCallReady(index, call))
