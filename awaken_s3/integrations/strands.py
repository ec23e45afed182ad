"""Strands Agents: a model wrapper whose stream survives the death of its process, and an
invocation that goes on from the session saved.

::

    from strands import Agent
    from strands.models.anthropic import AnthropicModel
    from strands.session.file_session_manager import FileSessionManager
    from awaken_s3 import FsStreamCheckpointStore
    from awaken_s3.integrations import checkpoint_key
    from awaken_s3.integrations.strands import ResumableModel, invoke_resumable

    model = ResumableModel(AnthropicModel(...), store=FsStreamCheckpointStore("ckpt"),
                           key=checkpoint_key("support", run_id))
    session = FileSessionManager(session_id=f"support-{run_id}", storage_dir="sessions")
    agent = Agent(model=model, tools=[...], session_manager=session)
    await invoke_resumable(agent, "...", run_id=run_id)
    # killed? run it again with the same run_id: the cut model call resumes mid-turn, and
    # the tools whose results the session saved do not run again

Strands streams Bedrock ConverseStream-shaped events whatever the model, so the wrapped
model's stream is read by the same translator as the Bedrock adapter. The agent receives the
whole turn: on a resume the saved text first (R1/R3), or the complete tool calls without a
model call (R2); the turn's checkpoint is deleted as it does. Needs the extra
``awaken-s3[strands]``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

from awaken_s3.integrations._turns import (
    Blocks,
    Calls,
    Finished,
    Op,
    ResumeOptions,
    Text,
    canonical_json,
    map_framework_error,
    resumable_ops,
)
from awaken_s3.messages import (
    AnyBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from awaken_s3.providers.bedrock_format import ConverseStreamTranslator
from awaken_s3.providers.stream_state import translate_stream
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.events import StreamEvent
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities, ToolSpec
from awaken_s3.streaming.retry import RetryPolicy

try:
    from strands import Agent
    from strands.agent.agent_result import AgentResult
    from strands.models.model import Model
    from strands.telemetry.metrics import EventLoopMetrics
except ImportError as exc:  # pragma: no cover - exercised by the install without the extra
    raise ImportError(
        "awaken_s3.integrations.strands needs Strands Agents: pip install 'awaken-s3[strands]'"
    ) from exc

__all__ = ["RUN_STATE_KEY", "ResumableModel", "invoke_resumable"]

#: awaken stop reasons as Strands names them
_STOP_REASONS = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filtered",
}


class ResumableModel(Model):
    """Any Strands model, its stream checkpointed in ``store`` under ``key``.

    ``key`` names the agent run (derive it from the run's id, see
    :func:`~awaken_s3.integrations.checkpoint_key`). A checkpoint resumes only the model call
    it was written for, so run the same conversation again after a crash
    (:func:`invoke_resumable` with a session manager) and the call that was cut resumes.
    ``prefill=True`` sends a resumed prefix as a trailing assistant message for the model to
    continue (only for models that accept one); the default asks the model, in a short user
    message, to continue it.
    """

    def __init__(
        self,
        model: Model,
        *,
        store: StreamCheckpointStore,
        key: str,
        prefill: bool = False,
        retry_policy: RetryPolicy | None = None,
        checkpoint_policy: CheckpointPolicy | None = None,
    ) -> None:
        self.model = model
        self.resume = ResumeOptions(store, key, prefill, retry_policy, checkpoint_policy)

    def update_config(self, **model_config: Any) -> None:
        self.model.update_config(**model_config)

    def get_config(self) -> Any:
        return self.model.get_config()

    def structured_output(
        self, output_model: Any, prompt: Any, system_prompt: str | None = None, **kwargs: Any
    ) -> Any:
        # A structured-output request is a separate call the framework makes itself.
        return self.model.structured_output(output_model, prompt, system_prompt, **kwargs)

    async def stream(
        self,
        messages: Any,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[Any, None]:
        bridge = _StrandsBridge(self, list(messages), tool_specs, system_prompt, kwargs)
        translator = _ToStrands()
        yield {"messageStart": {"role": "assistant"}}
        async for op in resumable_ops(self.resume, bridge, bridge.request, bridge.shape):
            for event in translator.events(op):
                yield event


class _StrandsBridge:
    """The wrapped model as a provider of the turn runner: the framework's own messages, plus
    the continuation the runner asks for, in Strands' message format."""

    def __init__(
        self,
        owner: ResumableModel,
        messages: list[Any],
        tool_specs: Any,
        system_prompt: str | None,
        kwargs: dict[str, Any],
    ) -> None:
        self.owner = owner
        self.messages = messages
        self.tool_specs = tool_specs
        self.system_prompt = system_prompt
        self.kwargs = kwargs
        self.name = f"strands:{type(owner.model).__name__}"
        config = owner.model.get_config()
        model_id = config.get("model_id") if isinstance(config, Mapping) else None
        self.base = tuple(to_message(m) for m in messages)
        self.request = ModelRequest(
            model=str(model_id or type(owner.model).__name__),
            messages=self.base,
            system=system_prompt,
            tools=tuple(_tool_spec(spec) for spec in tool_specs or ()),
        )
        self.shape = request_shape(messages, config, kwargs)

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=self.owner.resume.prefill)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # Strands' messages are TypedDicts of the same shape.
        native: list[Any] = [*self.messages]
        native += [from_message(m) for m in request.messages[len(self.base) :]]
        items = aiter(
            self.owner.model.stream(
                native,
                self.tool_specs,
                self.system_prompt,
                **self.kwargs,
            )
        )
        return translate_stream(
            items,
            ConverseStreamTranslator(),
            map_error=lambda exc: map_framework_error(exc, provider=self.name),
            ended_early="the model's stream ended without messageStop",
            provider=self.name,
        )


class _ToStrands:
    """Ops as Strands stream events: one text block, reasoning blocks before it, tool calls
    after it, then the stop and the usage."""

    def __init__(self) -> None:
        self.text_open = False

    def events(self, op: Op) -> list[dict[str, Any]]:
        if isinstance(op, Text):
            opening: list[dict[str, Any]] = (
                [] if self.text_open else [{"contentBlockStart": {"start": {}}}]
            )
            self.text_open = True
            return [*opening, {"contentBlockDelta": {"delta": {"text": op.text}}}]
        if isinstance(op, Blocks):
            return [event for block in op.blocks for event in _reasoning_events(block)]
        if isinstance(op, Calls):
            events: list[dict[str, Any]] = self._close_text()
            for call in op.calls:
                events += [
                    {
                        "contentBlockStart": {
                            "start": {"toolUse": {"toolUseId": call.id, "name": call.name}}
                        }
                    },
                    {
                        "contentBlockDelta": {
                            "delta": {"toolUse": {"input": json.dumps(call.input)}}
                        }
                    },
                    {"contentBlockStop": {}},
                ]
            return events
        assert isinstance(op, Finished)
        usage = op.outcome.usage
        return [
            *self._close_text(),
            {"messageStop": {"stopReason": _STOP_REASONS.get(op.outcome.stop_reason, "end_turn")}},
            {
                "metadata": {
                    "usage": {
                        "inputTokens": usage.input_tokens,
                        "outputTokens": usage.output_tokens,
                        "totalTokens": usage.input_tokens + usage.output_tokens,
                    },
                    "metrics": {"latencyMs": 0},
                }
            },
        ]

    def _close_text(self) -> list[dict[str, Any]]:
        if not self.text_open:
            return []
        self.text_open = False
        return [{"contentBlockStop": {}}]


def _reasoning_events(block: Any) -> list[dict[str, Any]]:
    if isinstance(block, ThinkingBlock):
        delta: dict[str, Any] = {"text": block.thinking}
        events = [{"contentBlockDelta": {"delta": {"reasoningContent": delta}}}]
        if block.signature:
            signature = {"signature": block.signature}
            events.append({"contentBlockDelta": {"delta": {"reasoningContent": signature}}})
        return [*events, {"contentBlockStop": {}}]
    if isinstance(block, RedactedThinkingBlock):
        data = {"redactedContent": base64.b64decode(block.data)}
        return [
            {"contentBlockDelta": {"delta": {"reasoningContent": data}}},
            {"contentBlockStop": {}},
        ]
    return []


#: the keyword arguments of ``Model.stream`` that shape the answer; the others (the
#: invocation's state, the agent's metadata, a cancel signal, where cache points go) are
#: per invocation or per process, and a rerun must still resume
_SHAPING_ARGUMENTS = ("tool_choice", "system_prompt_content", "structured_output_model")
#: what :func:`to_message` carries of a message; any other block (an image, a document) is
#: bound by its digest
_CARRIED = frozenset({"text", "toolUse", "toolResult", "reasoningContent", "cachePoint"})


def request_shape(
    messages: list[Any], config: object, kwargs: Mapping[str, Any]
) -> dict[str, object]:
    """What shapes the answer besides the messages' text and the tools: the model's
    configuration (its model id, its parameters), the call's shaping arguments, and the
    content blocks the provider-neutral messages do not carry."""
    return {
        "config": config,
        "arguments": {name: kwargs.get(name) for name in _SHAPING_ARGUMENTS},
        "media": [
            canonical_json(block)
            for message in messages
            for block in message.get("content", [])
            if not _CARRIED.issuperset(block)
        ],
    }


def _tool_spec(spec: Mapping[str, Any]) -> ToolSpec:
    schema = spec.get("inputSchema", {})
    return ToolSpec(
        name=str(spec.get("name", "")),
        description=str(spec.get("description", "")),
        input_schema=schema.get("json", schema) if isinstance(schema, Mapping) else {},
    )


def to_message(message: Mapping[str, Any]) -> Message:
    """A Strands message as a provider-neutral one (its text, tool calls and results,
    reasoning; media and cache points carry nothing a resume needs)."""
    blocks: list[AnyBlock] = []
    for block in message.get("content", []):
        if "text" in block:
            blocks.append(TextBlock(text=block["text"]))
        elif "toolUse" in block:
            use = block["toolUse"]
            blocks.append(
                ToolUseBlock(
                    id=use["toolUseId"], name=use["name"], input=dict(use.get("input") or {})
                )
            )
        elif "toolResult" in block:
            result = block["toolResult"]
            parts = [
                item["text"] if "text" in item else json.dumps(item.get("json"), sort_keys=True)
                for item in result.get("content", [])
                if "text" in item or "json" in item
            ]
            blocks.append(
                ToolResultBlock(
                    tool_use_id=result["toolUseId"],
                    content="".join(parts),
                    is_error=result.get("status") == "error",
                )
            )
        elif "reasoningContent" in block:
            reasoning = block["reasoningContent"]
            if "reasoningText" in reasoning:
                text = reasoning["reasoningText"]
                blocks.append(
                    ThinkingBlock(
                        thinking=text.get("text", ""), signature=text.get("signature") or ""
                    )
                )
            elif "redactedContent" in reasoning:
                data = base64.b64encode(reasoning["redactedContent"]).decode("ascii")
                blocks.append(RedactedThinkingBlock(data=data))
    role = "assistant" if message.get("role") == "assistant" else "user"
    return Message(role=role, content=tuple(blocks))


def from_message(message: Message) -> dict[str, Any]:
    """A continuation message (the assistant prefix, the "continue" request) for Strands."""
    content: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            content.append({"text": block.text})
        elif isinstance(block, ThinkingBlock) and block.signed:
            content.append(
                {
                    "reasoningContent": {
                        "reasoningText": {"text": block.thinking, "signature": block.signature}
                    }
                }
            )
        elif isinstance(block, RedactedThinkingBlock):
            content.append({"reasoningContent": {"redactedContent": base64.b64decode(block.data)}})
    return {"role": message.role, "content": content}


#: the key of the agent's state (saved by its session manager) naming the run in progress
RUN_STATE_KEY = "awaken_s3_run"


async def invoke_resumable(
    agent: Agent, prompt: Any, *, run_id: str, **invoke_kwargs: Any
) -> AgentResult:
    """Invoke ``agent`` (restored by its session manager, e.g. ``FileSessionManager``) for
    the run ``run_id``, so a crash of the whole loop loses no finished step.

    The session saves every message as the agent appends it, and the agent's state with it;
    the run's id goes into that state before its prompt. Run it again with the same
    ``run_id`` after a crash and the agent goes on from the last message saved, without the
    prompt (already saved): a model call that was cut resumes from its checkpoint (with a
    :class:`ResumableModel`), tool calls whose results were saved do not run again, and tool
    calls that were running when the process died run again (their results were never
    saved). A run whose answer was saved returns it without a model call. A new ``run_id``
    sends ``prompt``."""
    if agent.state.get(RUN_STATE_KEY) == run_id and agent.messages:
        last = agent.messages[-1]
        if last["role"] == "assistant" and not any("toolUse" in b for b in last["content"]):
            return AgentResult(
                stop_reason="end_turn", message=last, metrics=EventLoopMetrics(), state={}
            )
        return await agent.invoke_async(None, **invoke_kwargs)
    agent.state.set(RUN_STATE_KEY, run_id)
    return await agent.invoke_async(prompt, **invoke_kwargs)
