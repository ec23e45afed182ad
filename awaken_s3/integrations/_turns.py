"""What both framework adapters share: which checkpoint a model call may resume, the
settled content a framework's stream is fed, and the errors a framework's model raises.

A framework hands its model the whole conversation on every call. A checkpoint is bound to the
request it was written for: the number of model turns before it (``turn``, the model-call
index) and a digest of everything that shapes the answer (the provider-neutral messages, the
system prompt, the tools with their schemas, the model and the settings the framework passes;
canonical JSON, kept in the checkpoint's thread id). A call resumes the checkpoint under the
adapter's key only when both match. Anything else under the key is a leftover of another
request: it is deleted (conditionally on the version read) and the call starts fresh; it is
never replayed.

A turn ends once: whatever its kind (text, tool calls, structured output as an output tool
call, streamed or not), its checkpoint is deleted as the framework is handed the whole
response. The framework then owns the turn: it appends it to its history, runs its tools.
What survives a crash of the whole agent loop is therefore what the framework persisted (a
Strands session, a Pydantic AI message history): rerun from there, the cut model call resumes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from awaken_s3.errors import AwakenError
from awaken_s3.ids import MAX_ID_LENGTH
from awaken_s3.messages import KeptBlock, Message, ProviderBlock, ToolUseBlock
from awaken_s3.models import StoredCheckpoint
from awaken_s3.providers.classify import classify_http_error, error_fields
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.cleanup import Cleared, perform, read_checkpoint
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.errors import ConnectionDropped, ProviderError, StreamStalled, Throttled
from awaken_s3.streaming.fate import Absent, Delete
from awaken_s3.streaming.outcome import TurnCompleted, TurnFailed, TurnFenced, TurnOutcome
from awaken_s3.streaming.provider import ModelRequest, Provider
from awaken_s3.streaming.resumable import Existing, open_turn
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.turn_events import (
    ReasoningChunk,
    TextChunk,
    TurnEvent,
    TurnResumed,
)
from awaken_s3.streaming.turn_request import NOT_LOADED


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


def canonical_json(value: object) -> str:
    """``value`` as canonical JSON (sorted keys, no spaces). What JSON cannot hold is reduced
    to something stable across processes: bytes to their SHA-256, a pydantic model class to
    its JSON schema, a model or dataclass to its fields, anything else to its type's name
    (never a ``repr``, which may carry a memory address)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_stable
    )


def _stable(value: object) -> object:
    if isinstance(value, bytes | bytearray):
        return {"sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, type) and issubclass(value, BaseModel) and value is not BaseModel:
        return {"schema": value.model_json_schema()}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, set | frozenset):
        return sorted(canonical_json(v) for v in value)
    return {"type": f"{type(value).__module__}.{type(value).__qualname__}"}


def request_digest(request: ModelRequest, shape: Mapping[str, object]) -> str:
    """The digest a checkpoint is bound to (a valid thread id): the model, the system
    prompt, the messages, the tools with their schemas, and ``shape``, what else the
    framework passes that shapes the answer (its settings, its output schema)."""
    payload = {
        "model": request.model,
        "system": request.system,
        "messages": [m.model_dump(mode="json") for m in request.messages],
        "tools": sorted(
            ([t.name, t.description, t.input_schema] for t in request.tools),
            key=lambda tool: str(tool[0]),
        ),
        "shape": shape,
    }
    return "req-" + hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def model_turns(messages: Sequence[Message]) -> int:
    return sum(1 for m in messages if m.role == "assistant")


def checkpoint_key(*parts: str | int) -> str:
    """A checkpoint key from what names your run (a conversation id, a run id, a job id):
    the parts joined with ``-`` when that is a valid key (ASCII letters, digits, ``-``,
    ``_``, at most 128 characters), else a readable prefix and a digest of the exact parts,
    so different runs never share a key. Derive it from something your rerun knows again
    (the id the job was queued with), never a constant."""
    if not parts:
        raise ValueError("checkpoint_key needs at least one part")
    joined = "-".join(str(part) for part in parts)
    if len(joined) <= MAX_ID_LENGTH and _KEY_RE.fullmatch(joined):
        return joined
    digest = hashlib.sha256(canonical_json([str(p) for p in parts]).encode()).hexdigest()[:24]
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", joined).strip("_-")[:80]
    return f"{readable}-{digest}" if readable else f"k-{digest}"


_KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@dataclass(frozen=True, slots=True)
class ResumeOptions:
    """What an adapter's ``ResumableModel`` was built with."""

    store: StreamCheckpointStore
    #: names the agent run: the same key after a crash resumes its cut model call
    key: str
    #: send a resumed prefix as a trailing assistant message (only for models that continue
    #: one); otherwise a short user message asks the model to continue it
    prefill: bool = False
    retry_policy: RetryPolicy | None = None
    checkpoint_policy: CheckpointPolicy | None = None


async def resumable_ops(
    options: ResumeOptions,
    provider: Provider,
    request: ModelRequest,
    shape: Mapping[str, object],
) -> AsyncIterator[Op]:
    """Run one model call as a resumable turn and yield what the framework is fed."""
    turn_index = model_turns(request.messages)
    digest = request_digest(request, shape)
    existing = await _this_requests_checkpoint(options, turn_index, digest)
    turn = open_turn(
        options.store,
        options.key,
        provider,
        request,
        turn=turn_index,
        thread_id=digest,
        existing=existing,
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
    # The turn ends here, whatever it holds: the framework is handed all of it below (no I/O
    # between), appends it to its own history and runs its calls. Kept, the checkpoint would
    # answer the next identical request with this turn (an old structured output, tool calls
    # run again). A death before the hand-over costs the rerun a fresh model call, nothing
    # else: the framework had acted on nothing.
    await turn.commit(_framework_keeps_it)
    for op in feed.finish(outcome):
        yield op


async def _this_requests_checkpoint(options: ResumeOptions, turn: int, digest: str) -> Existing:
    """What is stored under the key, if it was written for this request; anything else is
    deleted conditionally on the version read (None: the call starts fresh). What cannot be
    judged here (corrupt, unreadable, a newer build's) is left to the turn runner."""
    found = await read_checkpoint(options.store, options.key)
    if isinstance(found, Absent):
        return None
    if not isinstance(found, StoredCheckpoint):
        return NOT_LOADED
    checkpoint = found.checkpoint
    if checkpoint.turn == turn and checkpoint.thread_id == digest:
        return found
    reason = (
        f"written for another request (model call {checkpoint.turn}, this is call {turn})"
        if checkpoint.turn != turn
        else f"written for another request of model call {turn}"
    )
    cleared = await perform(options.store, options.key, Delete(found.version, reason))
    return None if cleared is Cleared.GONE else NOT_LOADED


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
