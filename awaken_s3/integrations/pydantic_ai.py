"""Pydantic AI: a wrapper model whose requests survive the death of their process, and a
run whose conversation is saved at every step.

::

    from pydantic_ai import Agent
    from awaken_s3 import FsStreamCheckpointStore
    from awaken_s3.integrations import checkpoint_key
    from awaken_s3.integrations.pydantic_ai import MessageFile, ResumableModel, run_resumable

    model = ResumableModel("anthropic:claude-sonnet-4-5", store=FsStreamCheckpointStore("ckpt"),
                           key=checkpoint_key("support", run_id))
    agent = Agent(model, tools=[...])
    history = MessageFile(f"conversations/{run_id}.json")
    await run_resumable(agent, "...", run_id=run_id, history=history)
    # killed? run it again with the same run_id: the cut request resumes mid-turn, and the
    # tools whose results were saved do not run again

Built on Pydantic AI's ``WrapperModel``. Streaming requests (``run_stream``, ``iter``, event
stream handlers) and plain ones (``run``) both go out as a stream of the wrapped model, so
both are checkpointed; the agent receives the whole turn (on a resume the saved text first,
or the complete tool calls of an R2 plan without a model call), and the turn's checkpoint is
deleted as it does. Needs the extra ``awaken-s3[pydantic-ai]``.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic_core import to_jsonable_python

from awaken_s3.errors import AwakenError
from awaken_s3.integrations._turns import (
    Blocks,
    Calls,
    Finished,
    ResumeOptions,
    Text,
    canonical_json,
    map_framework_error,
    resumable_ops,
)
from awaken_s3.messages import (
    AnyBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.errors import ConnectionDropped
from awaken_s3.streaming.events import (
    ReasoningDelta,
    ReasoningEnd,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities, ToolSpec
from awaken_s3.streaming.retry import RetryPolicy

try:
    from pydantic_ai import messages as pai
    from pydantic_ai.agent import AbstractAgent, AgentRun, AgentRunResult, ModelRequestNode
    from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
    from pydantic_ai.models.wrapper import WrapperModel
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.usage import RequestUsage
except ImportError as exc:  # pragma: no cover - exercised by the install without the extra
    raise ImportError(
        "awaken_s3.integrations.pydantic_ai needs Pydantic AI: pip install 'awaken-s3[pydantic-ai]'"
    ) from exc

__all__ = [
    "MessageFile",
    "MessageStore",
    "ResumableModel",
    "SavedHistoryError",
    "SavingRun",
    "iter_resumable",
    "run_resumable",
]

_FINISH_REASONS: dict[str, pai.FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_call",
    "max_tokens": "length",
    "refusal": "content_filter",
}
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_call": "tool_use"}


class ResumableModel(WrapperModel):
    """Any Pydantic AI model (or model name), its requests checkpointed in ``store`` under
    ``key``: the key names the agent run (derive it from the run's id, see
    :func:`~awaken_s3.integrations.checkpoint_key`). A checkpoint resumes only the request it
    was written for, so run the same conversation again after a crash (:func:`run_resumable`
    saves it) and the request that was cut resumes. ``prefill=True`` sends a resumed prefix as
    a trailing assistant message (only for models that continue one); the default asks the
    model, in a short user message, to continue it."""

    def __init__(
        self,
        model: Model | str,
        *,
        store: StreamCheckpointStore,
        key: str,
        prefill: bool = False,
        retry_policy: RetryPolicy | None = None,
        checkpoint_policy: CheckpointPolicy | None = None,
    ) -> None:
        super().__init__(model)
        self.resume = ResumeOptions(store, key, prefill, retry_policy, checkpoint_policy)

    async def request(
        self,
        messages: list[pai.ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> pai.ModelResponse:
        async with self.request_stream(messages, model_settings, model_request_parameters) as s:
            async for _ in s:
                pass
            return s.get()

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[pai.ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncGenerator[StreamedResponse]:
        bridge = _Bridge(self, messages, model_settings, model_request_parameters, run_context)
        yield _ResumableResponse(
            model_request_parameters=model_request_parameters,
            bridge=bridge,
            _model_name=self.wrapped.model_name,
            _provider_name=self.wrapped.system,
            _provider_url=self.wrapped.base_url,
        )


@dataclass
class _ResumableResponse(StreamedResponse):
    """The whole turn as the agent receives it, fed from the resumable turn."""

    bridge: _Bridge = field(kw_only=True)
    _model_name: str = field(kw_only=True)
    _provider_name: str | None = field(kw_only=True)
    _provider_url: str | None = field(kw_only=True)
    _timestamp: datetime = field(default_factory=lambda: datetime.now(UTC), kw_only=True)

    async def _get_event_iterator(self) -> AsyncIterator[pai.ModelResponseStreamEvent]:
        parts = self._parts_manager
        bridge = self.bridge
        async for op in resumable_ops(bridge.owner.resume, bridge, bridge.request, bridge.shape):
            if isinstance(op, Text):
                for event in parts.handle_text_delta(vendor_part_id="text", content=op.text):
                    yield event
            elif isinstance(op, Blocks):
                for i, block in enumerate(op.blocks):
                    if isinstance(block, ThinkingBlock):
                        part = pai.ThinkingPart(
                            content=block.thinking,
                            signature=block.signature or None,
                            provider_name=self._provider_name if block.signature else None,
                        )
                        yield parts.handle_part(vendor_part_id=f"thinking-{i}", part=part)
            elif isinstance(op, Calls):
                for call in op.calls:
                    yield parts.handle_tool_call_part(
                        vendor_part_id=call.id,
                        tool_name=call.name,
                        args=dict(call.input),
                        tool_call_id=call.id,
                    )
            elif isinstance(op, Finished):
                outcome = op.outcome
                self.finish_reason = _FINISH_REASONS.get(outcome.stop_reason)
                usage = outcome.usage
                self._usage = RequestUsage(
                    input_tokens=usage.input_tokens
                    + usage.cache_read_tokens
                    + usage.cache_write_tokens,
                    output_tokens=usage.output_tokens,
                    cache_read_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                )

    async def close_stream(self) -> None:
        # Every stream of the wrapped model is closed by the turn that opened it.
        return None

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def provider_name(self) -> str | None:
        return self._provider_name

    @property
    def provider_url(self) -> str | None:
        return self._provider_url

    @property
    def timestamp(self) -> datetime:
        return self._timestamp


class _Bridge:
    """The wrapped model as a provider of the turn runner: the agent's own messages, plus the
    continuation the runner asks for, as Pydantic AI messages."""

    def __init__(
        self,
        owner: ResumableModel,
        messages: list[pai.ModelMessage],
        settings: ModelSettings | None,
        parameters: ModelRequestParameters,
        run_context: Any,
    ) -> None:
        self.owner = owner
        self.messages = messages
        self.settings = settings
        self.parameters = parameters
        self.run_context = run_context
        self.name = f"pydantic-ai:{owner.wrapped.system}"
        system, base = to_messages(messages)
        self.base = tuple(base)
        self.request = ModelRequest(
            model=owner.wrapped.model_name,
            messages=self.base,
            system=system,
            tools=tuple(
                ToolSpec(t.name, t.description or "", t.parameters_json_schema)
                for t in parameters.function_tools
            ),
        )
        self.shape = request_shape(messages, settings, parameters)

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=self.owner.resume.prefill)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        continuation = [from_message(m) for m in request.messages[len(self.base) :]]
        return self._events([*self.messages, *continuation])

    async def _events(self, messages: list[pai.ModelMessage]) -> AsyncIterator[StreamEvent]:
        translator = _FromPydanticAI()
        try:
            async with self.owner.wrapped.request_stream(
                messages, self.settings, self.parameters, self.run_context
            ) as response:
                async for event in response:
                    for out in translator.feed(event):
                        yield out
                finished = response.get()
        except Exception as exc:
            mapped = map_framework_error(exc, provider=self.name)
            if mapped is None:
                raise
            raise mapped from exc
        if finished.state != "complete":
            raise ConnectionDropped("the model's stream did not complete", provider=self.name)
        usage = finished.usage
        cache = usage.cache_read_tokens + usage.cache_write_tokens
        yield UsageEvent(
            max(0, usage.input_tokens - cache),
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        )
        reason = _STOP_REASONS.get(finished.finish_reason or "")
        if reason is None:
            reason = "tool_use" if translator.tools else "end_turn"
        yield StopEvent(reason)


class _FromPydanticAI:
    """Pydantic AI part events as stream events; tool calls and reasoning numbered 0-based
    in the order they start."""

    def __init__(self) -> None:
        self.tools: dict[int, int] = {}
        self.reasoning: dict[int, int] = {}

    def feed(self, event: object) -> list[StreamEvent]:
        if isinstance(event, pai.PartStartEvent):
            return self._start(event.index, event.part)
        if isinstance(event, pai.PartDeltaEvent):
            delta = event.delta
            if isinstance(delta, pai.TextPartDelta):
                return [TextDelta(delta.content_delta)] if delta.content_delta else []
            if isinstance(delta, pai.ThinkingPartDelta) and event.index in self.reasoning:
                return [
                    ReasoningDelta(
                        self.reasoning[event.index],
                        text=delta.content_delta or "",
                        signature=delta.signature_delta or "",
                    )
                ]
            if isinstance(delta, pai.ToolCallPartDelta) and event.index in self.tools:
                return _arguments(self.tools[event.index], delta.args_delta)
            return []
        if isinstance(event, pai.PartEndEvent):
            if event.index in self.tools:
                return [ToolCallEnd(self.tools[event.index])]
            if event.index in self.reasoning:
                return [ReasoningEnd(self.reasoning[event.index])]
        return []

    def _start(self, index: int, part: object) -> list[StreamEvent]:
        if isinstance(part, pai.TextPart):
            return [TextDelta(part.content)] if part.content else []
        if isinstance(part, pai.ThinkingPart):
            n = self.reasoning[index] = len(self.reasoning)
            return [ReasoningDelta(n, text=part.content, signature=part.signature or "")]
        if isinstance(part, pai.ToolCallPart):
            n = self.tools[index] = len(self.tools)
            return [ToolCallStart(n, part.tool_call_id, part.tool_name), *_arguments(n, part.args)]
        return []


#: settings of the transport, not of the answer: a rerun may change them and still resume
_TRANSPORT_SETTINGS = frozenset(
    {"timeout", "request_timeout", "first_event_timeout", "max_retries"}
)


def request_shape(
    messages: list[pai.ModelMessage],
    settings: ModelSettings | None,
    parameters: ModelRequestParameters,
) -> dict[str, object]:
    """What shapes the answer besides the messages' text and the function tools: the model
    settings, the output schema (an output tool, a native or prompted output object), and
    the user content that is not text (its digest)."""
    return {
        "settings": {k: v for k, v in (settings or {}).items() if k not in _TRANSPORT_SETTINGS},
        "function_tools": [_tool(t) for t in parameters.function_tools],
        "output_mode": parameters.output_mode,
        "output_tools": [_tool(t) for t in parameters.output_tools],
        "output_object": parameters.output_object,
        "prompted_output_template": parameters.prompted_output_template,
        "allow_text_output": parameters.allow_text_output,
        "allow_image_output": parameters.allow_image_output,
        "native_tools": parameters.native_tools,
        "media": [
            canonical_json(to_jsonable_python(item, bytes_mode="base64"))
            for message in messages
            if isinstance(message, pai.ModelRequest)
            for part in message.parts
            if isinstance(part, pai.UserPromptPart) and not isinstance(part.content, str)
            for item in part.content
            if not isinstance(item, str)
        ],
    }


def _tool(tool: ToolDefinition) -> list[object]:
    return [tool.name, tool.description, tool.parameters_json_schema, tool.strict]


def _arguments(index: int, args: str | dict[str, Any] | None) -> list[StreamEvent]:
    if not args:
        return []
    return [ToolCallDelta(index, args if isinstance(args, str) else json.dumps(args))]


def to_messages(messages: list[pai.ModelMessage]) -> tuple[str | None, list[Message]]:
    """The system prompt and the provider-neutral messages of a Pydantic AI history (its
    text, tool calls and returns, retries and reasoning; timestamps and run ids left out, so
    the same conversation gives the same messages on every run)."""
    system: list[str] = []
    out: list[Message] = []
    for message in messages:
        blocks: list[AnyBlock] = []
        if isinstance(message, pai.ModelRequest):
            if message.instructions:
                system.append(message.instructions)
            for part in message.parts:
                if isinstance(part, pai.SystemPromptPart):
                    system.append(part.content)
                elif isinstance(part, pai.UserPromptPart):
                    content = part.content
                    text = (
                        content
                        if isinstance(content, str)
                        else json.dumps([c for c in content if isinstance(c, str)])
                    )
                    blocks.append(TextBlock(text=text))
                elif isinstance(part, pai.ToolReturnPart):
                    blocks.append(
                        ToolResultBlock(
                            tool_use_id=part.tool_call_id, content=part.model_response_str()
                        )
                    )
                elif isinstance(part, pai.RetryPromptPart):
                    blocks.append(TextBlock(text=part.model_response()))
            out.append(Message(role="user", content=tuple(blocks)))
        else:
            for response_part in message.parts:
                if isinstance(response_part, pai.TextPart):
                    blocks.append(TextBlock(text=response_part.content))
                elif isinstance(response_part, pai.ToolCallPart):
                    blocks.append(
                        ToolUseBlock(
                            id=response_part.tool_call_id,
                            name=response_part.tool_name,
                            input=response_part.args_as_dict(),
                        )
                    )
                elif isinstance(response_part, pai.ThinkingPart):
                    blocks.append(
                        ThinkingBlock(
                            thinking=response_part.content, signature=response_part.signature or ""
                        )
                    )
            out.append(Message(role="assistant", content=tuple(blocks)))
    return ("\n\n".join(system) or None), out


def from_message(message: Message) -> pai.ModelMessage:
    """A continuation message (the assistant prefix, the "continue" request) for Pydantic AI."""
    if message.role == "user":
        return pai.ModelRequest(parts=[pai.UserPromptPart(content=message.text)])
    parts: list[pai.ModelResponsePart] = []
    for block in message.content:
        if isinstance(block, ThinkingBlock) and block.signed:
            parts.append(pai.ThinkingPart(content=block.thinking, signature=block.signature))
        elif isinstance(block, TextBlock):
            parts.append(pai.TextPart(content=block.text))
    return pai.ModelResponse(parts=parts)


class SavedHistoryError(AwakenError, ValueError):
    """A saved conversation that cannot be read back."""


class MessageStore(Protocol):
    """Where :func:`run_resumable` keeps a conversation: its messages, and the id of the run
    that last saved them (a file: :class:`MessageFile`; a database row works the same)."""

    def load(self) -> tuple[str | None, list[pai.ModelMessage]]: ...

    def save(self, run_id: str, messages: Sequence[pai.ModelMessage]) -> None: ...


class MessageFile:
    """A conversation's messages in a JSON file, as Pydantic AI serialises them
    (``ModelMessagesTypeAdapter``), with the id of the run that last saved them. Each save
    replaces the file whole (a temporary file, fsync, rename), so a crash leaves the last
    save readable."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load(self) -> tuple[str | None, list[pai.ModelMessage]]:
        try:
            body = self.path.read_bytes()
        except FileNotFoundError:
            return None, []
        try:
            data = json.loads(body)
            messages = pai.ModelMessagesTypeAdapter.validate_python(data["messages"])
        except (ValueError, KeyError, TypeError) as exc:
            # Never guessed around: a run resumed on a history it cannot read would redo
            # what that history recorded as done.
            raise SavedHistoryError(f"{self.path} is not a saved conversation") from exc
        run_id = data.get("run_id")
        return (run_id if isinstance(run_id, str) else None), messages

    def save(self, run_id: str, messages: Sequence[pai.ModelMessage]) -> None:
        body = json.dumps(
            {
                "run_id": run_id,
                "messages": pai.ModelMessagesTypeAdapter.dump_python(list(messages), mode="json"),
            }
        ).encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.tmp")
        try:
            with temporary.open("wb") as out:
                out.write(body)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        finally:
            temporary.unlink(missing_ok=True)


async def run_resumable(
    agent: AbstractAgent[Any, Any],
    prompt: str | Sequence[pai.UserContent] | None,
    *,
    run_id: str,
    history: MessageStore,
    **iter_kwargs: Any,
) -> AgentRunResult[Any]:
    """Run ``agent`` on ``prompt`` to its end through :func:`iter_resumable`, the
    conversation saved to ``history`` at every step; its result. Rerun it with the same
    ``run_id`` after a crash of the whole loop: it goes on from the last step saved."""
    async with iter_resumable(agent, prompt, run_id=run_id, history=history, **iter_kwargs) as run:
        async for _ in run:
            pass
    if run.result is None:  # pragma: no cover - an iteration that ended without End raised
        raise RuntimeError("the agent run ended without a result")
    return run.result


@asynccontextmanager
async def iter_resumable(
    agent: AbstractAgent[Any, Any],
    prompt: str | Sequence[pai.UserContent] | None,
    *,
    run_id: str,
    history: MessageStore,
    **iter_kwargs: Any,
) -> AsyncIterator[SavingRun]:
    """``agent.iter`` on ``prompt`` whose conversation is saved to ``history`` before each
    node runs, so a crash of the whole loop loses no finished step. Iterate it (and stream
    a node with ``node.stream(run.ctx)``) as Pydantic AI's own ``agent.iter``.

    Open it again with the same ``run_id`` after a crash and the run goes on from the last
    step saved, without its prompt (already saved): a model call that was cut resumes from
    its checkpoint (with a :class:`ResumableModel`), tool calls whose results were saved do
    not run again, and tool calls that were running when the process died run again (their
    results were never saved). A new ``run_id`` appends ``prompt`` to the conversation saved.
    Other keyword arguments go to ``agent.iter`` (``message_history`` only for a
    conversation that has nothing saved)."""
    saved_run, messages = history.load()
    rerun = saved_run == run_id and bool(messages)
    if messages:
        iter_kwargs["message_history"] = messages
    async with agent.iter(None if rerun else prompt, **iter_kwargs) as run:
        yield SavingRun(run, run_id, history, started=rerun, before=len(messages))


class SavingRun:
    """A Pydantic AI ``AgentRun`` whose conversation is saved before each node it yields
    runs; its ``ctx`` and ``result`` are the run's."""

    def __init__(
        self,
        run: AgentRun[Any, Any],
        run_id: str,
        history: MessageStore,
        *,
        started: bool,
        before: int,
    ) -> None:
        self.run, self.run_id, self.history = run, run_id, history
        self.started, self.before = started, before

    @property
    def ctx(self) -> Any:
        return self.run.ctx

    @property
    def result(self) -> AgentRunResult[Any] | None:
        return self.run.result

    def all_messages(self) -> list[pai.ModelMessage]:
        return self.run.all_messages()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._nodes()

    async def _nodes(self) -> AsyncIterator[Any]:
        async for node in self.run:
            step = _messages_so_far(self.run, node)
            # Until this run's first request is about to go out, what is saved is the last
            # run's: marking it as this run's would drop this run's prompt on a rerun.
            self.started = self.started or len(step) > self.before
            if self.started:
                self.history.save(self.run_id, step)
            yield node


def _messages_so_far(run: AgentRun[Any, Any], node: object) -> list[pai.ModelMessage]:
    """The conversation as it stands before ``node`` runs: a request node's request is not in
    the run's messages until it is sent, and it holds the prompt or the tools' results."""
    messages = list(run.all_messages())
    if isinstance(node, ModelRequestNode) and not any(m is node.request for m in messages):
        messages.append(node.request)
    return messages
