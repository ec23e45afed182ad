"""Folds stream events into the partial turn.

The hot path (:meth:`StreamAccumulator.apply`) runs once per delta, so it only
appends to lists and bumps counters; strings are joined lazily when a snapshot
or the final turn is built. Deltas are ``str``: text is kept exactly as
received and never re-encoded or split, so a character (or grapheme) split
across deltas survives.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from awaken_s3.messages import KeptBlock, Message, ToolUseBlock
from awaken_s3.models import PartialToolCall, StreamCheckpoint
from awaken_s3.streaming.continuation import join_at_seam, seam_undecided
from awaken_s3.streaming.events import (
    RefusalDelta,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.outcome import DroppedToolCall, Usage
from awaken_s3.streaming.reasoning import KEPT_EVENTS, KeptBlocks
from awaken_s3.streaming.recovery import PlanKind, assemble_turn, split_tool_calls
from awaken_s3.streaming.refusal import REFUSAL, with_refusal

_log = logging.getLogger("awaken_s3.streaming")


@dataclass
class _ToolCallState:
    index: int
    id: str
    name: str
    chunks: list[str] = field(default_factory=list)
    closed: bool = False

    def partial(self) -> PartialToolCall:
        if len(self.chunks) > 1:
            self.chunks[:] = ["".join(self.chunks)]
        return PartialToolCall(
            index=self.index,
            id=self.id,
            name=self.name,
            arguments=self.chunks[0] if self.chunks else "",
            closed=self.closed,
        )


class StreamAccumulator:
    """The partial turn: text, tool calls by index, usage and stop reason.

    A resumed turn starts from a prefix; the continuation that follows is joined
    to it through the seam check of :mod:`awaken_s3.streaming.continuation` as soon
    as the seam is decided. Until then the continuation is held back: :attr:`text`
    (and so every snapshot, checkpoint and in-process resume) is the prefix alone,
    and only the completed turn (:meth:`message`) joins an undecided tail, because
    then no more text can come.
    """

    def __init__(self, prefix: str = "", *, trim_echo: bool = False) -> None:
        self._chunks: list[str] = []
        self._calls: dict[int, _ToolCallState] = {}
        self._completed_usage = Usage()
        self._input_tokens = 0
        self._output_tokens = 0
        self._cache_read_tokens = 0
        self._cache_write_tokens = 0
        self._kept = KeptBlocks()
        self._refusal: list[str] = []
        self.stop_reason: str | None = None
        #: characters of text and tool arguments received so far (all attempts)
        self.content_chars = 0
        #: ``len(self.text)``, kept up to date without joining the text on every delta
        self.text_length = 0
        #: while not None, the seam is open: ``_chunks`` holds only the continuation
        self._seam_prefix: str | None = None
        self._seam_trim_echo = False
        self.restart(prefix, trim_echo=trim_echo)

    # -- the hot path -------------------------------------------------------

    def apply(self, event: StreamEvent) -> bool:
        """Fold one event; True when it is a tool-call boundary (start or end)."""
        if isinstance(event, TextDelta):
            text = event.text
            if text:
                self._chunks.append(text)
                self.content_chars += len(text)
                if self._seam_prefix is not None:
                    self._try_settle_seam()
                else:
                    self.text_length += len(text)
            return False
        if isinstance(event, ToolCallDelta):
            call = self._calls.get(event.index)
            if call is None:
                # A delta before its start: keep it, the planner drops a call without a name.
                call = self._calls[event.index] = _ToolCallState(event.index, "", "")
            if call.closed:
                _log.warning("ignoring arguments for closed tool call %d", event.index)
            elif event.arguments:
                call.chunks.append(event.arguments)
                self.content_chars += len(event.arguments)
            return False
        if isinstance(event, ToolCallStart):
            existing = self._calls.get(event.index)
            if existing is None:
                self._calls[event.index] = _ToolCallState(event.index, event.id, event.name)
            else:
                existing.id = existing.id or event.id
                existing.name = existing.name or event.name
            return True
        if isinstance(event, ToolCallEnd):
            call = self._calls.get(event.index)
            if call is None:
                call = self._calls[event.index] = _ToolCallState(event.index, "", "")
            call.closed = True
            return True
        if isinstance(event, UsageEvent):
            self._input_tokens = max(self._input_tokens, event.input_tokens)
            self._output_tokens = max(self._output_tokens, event.output_tokens)
            self._cache_read_tokens = max(self._cache_read_tokens, event.cache_read_tokens)
            self._cache_write_tokens = max(self._cache_write_tokens, event.cache_write_tokens)
            return False
        if isinstance(event, StopEvent):
            self.stop_reason = event.stop_reason
            return False
        if isinstance(event, KEPT_EVENTS):
            return self._kept.apply(event)
        if isinstance(event, RefusalDelta):
            # Not checkpoint content (a refusal is never a prefix), so not counted either.
            if event.text:
                self._refusal.append(event.text)
            return False
        raise TypeError(f"not a stream event: {event!r}")

    # -- views --------------------------------------------------------------

    def _joined(self) -> str:
        if len(self._chunks) > 1:
            self._chunks[:] = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    @property
    def text(self) -> str:
        """The decided text: while the seam is open, the prefix alone."""
        if self._seam_prefix is not None:
            return self._seam_prefix
        return self._joined()

    @property
    def final_text(self) -> str:
        """The whole text of a turn that ended: an undecided tail is joined as it stands."""
        if self._seam_prefix is None:
            return self._joined()
        return join_at_seam(self._seam_prefix, self._joined(), trim_echo=self._seam_trim_echo)

    @property
    def tool_calls(self) -> tuple[PartialToolCall, ...]:
        return tuple(self._calls[i].partial() for i in sorted(self._calls))

    def tool_call(self, index: int) -> PartialToolCall | None:
        call = self._calls.get(index)
        return call.partial() if call is not None else None

    @property
    def usage(self) -> Usage:
        return self._completed_usage + Usage(
            self._input_tokens,
            self._output_tokens,
            self._cache_read_tokens,
            self._cache_write_tokens,
        )

    @property
    def reusable_blocks(self) -> tuple[KeptBlock, ...]:
        """Reasoning and server blocks a continuation may carry (see streaming.reasoning)."""
        return self._kept.reusable()

    @property
    def refusal(self) -> str:
        return "".join(self._refusal)

    def split_tool_calls(self) -> tuple[tuple[ToolUseBlock, ...], tuple[DroppedToolCall, ...]]:
        return split_tool_calls(self.tool_calls)

    def message(self) -> tuple[Message, tuple[DroppedToolCall, ...]]:
        """The whole turn (text, then complete calls in stream order) and the dropped calls."""
        complete, dropped = self.split_tool_calls()
        message = assemble_turn(self.final_text, complete, leading=self._kept.committed())
        if self._refusal or self.stop_reason == REFUSAL:
            message = with_refusal(message, self.refusal)
        return message, dropped

    def snapshot(
        self,
        *,
        run_id: str,
        thread_id: str,
        model: str,
        turn: int,
        retry_count: int,
        epoch: int,
        writer: str,
        suspended: bool = False,
        last_error: str | None = None,
        resumed_with: PlanKind | None = None,
    ) -> StreamCheckpoint:
        return StreamCheckpoint(
            run_id=run_id,
            thread_id=thread_id,
            model=model,
            turn=turn,
            partial_text=self.text,
            tool_calls=self.tool_calls,
            retry_count=retry_count,
            epoch=epoch,
            writer=writer,
            suspended=suspended,
            last_error=last_error,
            reusable_blocks=self._kept.reusable(),
            resumed_with=resumed_with,
        )

    # -- attempts -----------------------------------------------------------

    def restart(
        self, prefix: str, *, trim_echo: bool = False, blocks: Sequence[KeptBlock] = ()
    ) -> None:
        """Start a new attempt from ``prefix`` (and the reusable ``blocks`` carried in front
        of it): tool calls, other blocks, a refusal and the stop reason are dropped.

        Usage of the attempt so far is kept (every attempt is paid for).
        """
        self._completed_usage = self.usage
        self._input_tokens = self._output_tokens = 0
        self._cache_read_tokens = self._cache_write_tokens = 0
        self._kept.restart(blocks)
        self._refusal = []
        self._calls = {}
        self.stop_reason = None
        self._chunks = []
        self._seam_prefix = prefix if prefix else None
        self._seam_trim_echo = trim_echo
        self.text_length = len(prefix)

    def _try_settle_seam(self) -> None:
        prefix = self._seam_prefix
        assert prefix is not None
        continuation = self._joined()
        if seam_undecided(prefix, continuation, trim_echo=self._seam_trim_echo):
            return
        self._seam_prefix = None
        self._chunks = [join_at_seam(prefix, continuation, trim_echo=self._seam_trim_echo)]
        self.text_length = len(self._chunks[0])
