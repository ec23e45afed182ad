"""What both framework adapters share: which checkpoint a model call may resume, the
settled content a framework's stream is fed, and the errors a framework's model raises.

A framework hands its model the whole conversation on every call. The call resumes the
checkpoint stored under the adapter's key only when that checkpoint was written for the same
conversation: the same number of model turns before it (``turn``) and the same content
(a digest of the provider-neutral messages, kept in the checkpoint's thread id). Anything
else under the key is a leftover of another conversation and is replaced.

The checkpoint outlives a turn that ends with tool calls: if the process dies while the
framework runs the tools, running the same invocation again finds the complete calls and
hands them back without a model call (R2). A turn that ends without tool calls (the answer)
deletes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from awaken_s3.errors import AwakenError
from awaken_s3.messages import KeptBlock, Message, ProviderBlock, ToolUseBlock
from awaken_s3.providers.classify import classify_http_error, error_fields
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.errors import ConnectionDropped, ProviderError, StreamStalled, Throttled
from awaken_s3.streaming.outcome import TurnCompleted, TurnFailed, TurnFenced, TurnOutcome
from awaken_s3.streaming.provider import ModelRequest, Provider
from awaken_s3.streaming.resumable import open_turn
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.turn_events import (
    ReasoningChunk,
    TextChunk,
    TurnEvent,
    TurnResumed,
)


class ResumableTurnError(AwakenError, RuntimeError):
    """The turn did not complete: it failed (``code`` is the classified error, e.g.
    ``retry_budget_exhausted``), or another writer took the checkpoint over (``fenced``)."""

    def __init__(self, outcome: TurnOutcome) -> None:
        self.outcome = outcome
        if isinstance(outcome, TurnFailed):
            self.code = outcome.error.code
            detail = outcome.error.message
        elif isinstance(outcome, TurnFenced):
            self.code, detail = "fenced", outcome.detail
        else:
            self.code, detail = outcome.kind, "the turn did not complete"
        super().__init__(f"{self.code}: {detail}")


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Blocks:
    """Reasoning blocks, in front of the text."""

    blocks: tuple[KeptBlock, ...]


@dataclass(frozen=True, slots=True)
class Calls:
    calls: tuple[ToolUseBlock, ...]


@dataclass(frozen=True, slots=True)
class Finished:
    outcome: TurnCompleted


Op = Text | Blocks | Calls | Finished


class TurnFeed:
    """What a framework's stream may be given, in the order its message holds it.

    Text goes out as it is decided (a framework cannot take text back; the turn never does
    within a process, see :mod:`awaken_s3.streaming.turn_events`). Reasoning comes before
    the text in a message, and an interrupted attempt's reasoning can still be dropped, so a
    turn that reasons holds its text back and everything goes out whole at the end. Tool
    calls go out at the end, when the turn holds every complete one.
    """

    def __init__(self) -> None:
        self.sent = 0
        self.holding = False

    def feed(self, event: TurnEvent) -> list[Op]:
        if isinstance(event, TurnResumed):
            if event.blocks:
                self.holding = True
            return self._text_up_to(event.text)
        if isinstance(event, ReasoningChunk):
            self.holding = True
        elif isinstance(event, TextChunk) and not self.holding:
            self.sent = event.offset + len(event.text)
            return [Text(event.text)]
        return []

    def finish(self, outcome: TurnCompleted) -> list[Op]:
        message = outcome.message
        ops: list[Op] = []
        if self.holding:
            blocks = tuple(b for b in message.content if _is_reasoning(b))
            if blocks:
                ops.append(Blocks(blocks))  # type: ignore[arg-type]
        ops.extend(self._text_up_to(message.text))
        if message.tool_uses:
            ops.append(Calls(message.tool_uses))
        ops.append(Finished(outcome))
        return ops

    def _text_up_to(self, text: str) -> list[Op]:
        if self.holding or len(text) <= self.sent:
            return []
        chunk, self.sent = text[self.sent :], len(text)
        return [Text(chunk)]


def _is_reasoning(block: object) -> bool:
    return getattr(block, "type", None) in ("thinking", "redacted_thinking") and not isinstance(
        block, ProviderBlock
    )


def conversation_id(request: ModelRequest) -> str:
    """A stable id of what the model call continues (a valid thread id)."""
    payload = {
        "system": request.system,
        "messages": [m.model_dump(mode="json") for m in request.messages],
        "tools": sorted(t.name for t in request.tools),
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return f"conv-{digest[:40]}"


def model_turns(messages: Sequence[Message]) -> int:
    return sum(1 for m in messages if m.role == "assistant")


@dataclass(frozen=True, slots=True)
class ResumeOptions:
    """What an adapter's ``ResumableModel`` was built with."""

    store: StreamCheckpointStore
    #: names the agent invocation: the same key after a crash resumes its model call
    key: str
    #: send a resumed prefix as a trailing assistant message (only for models that continue
    #: one); otherwise a short user message asks the model to continue it
    prefill: bool = False
    retry_policy: RetryPolicy | None = None
    checkpoint_policy: CheckpointPolicy | None = None


async def resumable_ops(
    options: ResumeOptions, provider: Provider, request: ModelRequest
) -> AsyncIterator[Op]:
    """Run one model call as a resumable turn and yield what the framework is fed."""
    turn = open_turn(
        options.store,
        options.key,
        provider,
        request,
        turn=model_turns(request.messages),
        thread_id=conversation_id(request),
        retry_policy=options.retry_policy,
        checkpoint_policy=options.checkpoint_policy,
    )
    feed = TurnFeed()
    async for event in turn:
        for op in feed.feed(event):
            yield op
    outcome = turn.outcome
    if not isinstance(outcome, TurnCompleted):
        raise ResumableTurnError(outcome) if outcome is not None else RuntimeError("no outcome")
    if not outcome.message.tool_uses:
        # The answer: nothing of this invocation is left to resume.
        await turn.commit(_framework_keeps_it)
    for op in feed.finish(outcome):
        yield op


def _framework_keeps_it(message: Message) -> None:
    """The framework appends the turn to its own history; nothing to save here."""


def map_framework_error(exc: BaseException, *, provider: str) -> ProviderError | None:
    """A framework's (or its SDK's) exception as a typed provider error, or None when it is
    not one (it then ends the turn as an unexpected error, never retried)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ProviderError):
            return current
        name = type(current).__name__
        status = getattr(current, "status_code", None)
        if isinstance(status, int):
            error_type, error_code, message = error_fields(getattr(current, "body", None))
            return classify_http_error(
                status=status,
                error_type=error_type,
                error_code=error_code,
                message=message or str(current),
                provider=provider,
            )
        if name in ("ModelThrottledException", "RateLimitError"):
            return Throttled(str(current), provider=provider)
        if "Timeout" in name:
            return StreamStalled(str(current), provider=provider)
        if name in ("APIConnectionError", "RemoteProtocolError", "ReadError", "ConnectError") or (
            "Transport" in name or "Protocol" in name
        ):
            return ConnectionDropped(str(current), provider=provider)
        current = current.__cause__ or current.__context__
    return None
