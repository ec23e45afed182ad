"""OpenAI-compatible Chat Completions: request building and stream translation (pure).

Works for OpenAI and for compatible servers (vLLM, Ollama, LiteLLM ...). The
translator reads the SDK's chunk models by attribute.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from awaken_s3.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from awaken_s3.providers.stream_state import ends_with_assistant, request_fields, rstrip_prefill
from awaken_s3.streaming.events import (
    ReasoningDelta,
    ReasoningEnd,
    RefusalDelta,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.provider import ModelRequest

_FINISH_REASONS: Final = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


def normalise_finish_reason(reason: str | None) -> str:
    return _FINISH_REASONS.get(reason or "", "other")


def _user_messages(message: Message) -> list[dict[str, Any]]:
    # Tool results become ``tool`` messages, which must directly follow the
    # assistant message that made the calls; any user text comes after them.
    out: list[dict[str, Any]] = []
    text: list[str] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            content = f"Error: {block.content}" if block.is_error else block.content
            out.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
        elif isinstance(block, TextBlock):
            text.append(block.text)
        else:
            raise ValueError("a user message cannot carry a tool_use block")
    if text:
        out.append({"role": "user", "content": "".join(text)})
    return out


def _assistant_message(message: Message) -> dict[str, Any]:
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.input, ensure_ascii=False)},
        }
        for b in message.content
        if isinstance(b, ToolUseBlock)
    ]
    result: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        result["tool_calls"] = calls
    return result


def build_openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    # A prefill ending in whitespace is stripped here as in the other adapters: servers
    # that continue it (vLLM) would otherwise double the space the model emits itself.
    for message in rstrip_prefill(request.messages):
        if message.role == "user":
            out.extend(_user_messages(message))
        else:
            out.append(_assistant_message(message))
    return out


#: vLLM's ``extra_body`` fields that only make sense when the last message is the
#: assistant's (it answers them with a 400 otherwise)
CONTINUATION_ONLY_BODY: Final = ("continue_final_message", "add_generation_prompt")


def _without_continuation_fields(fields: dict[str, Any]) -> dict[str, Any]:
    body = fields.get("extra_body")
    if not isinstance(body, Mapping) or "continue_final_message" not in body:
        return fields
    kept = {k: v for k, v in body.items() if k not in CONTINUATION_ONLY_BODY}
    return (
        {**fields, "extra_body": kept}
        if kept
        else {k: v for k, v in fields.items() if k != "extra_body"}
    )


def build_openai_request(
    request: ModelRequest, *, max_tokens_param: str, defaults: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create`` (without ``stream``).

    ``defaults`` are the provider's own extra fields, which the request's ``extra``
    overrides. vLLM's continuation fields are sent only on a continuation, wherever
    they were set.
    """
    params: dict[str, Any] = {
        "model": request.model,
        "messages": build_openai_messages(request),
        max_tokens_param: request.max_tokens,
        # Without it the stream carries no token counts at all.
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.input_schema),
                },
            }
            for tool in request.tools
        ]
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.stop_sequences:
        params["stop"] = list(request.stop_sequences)
    fields = request_fields(request, defaults or {})
    if not ends_with_assistant(request.messages):
        fields = _without_continuation_fields(fields)
    params.update(fields)
    return params


class _Call:
    __slots__ = ("given_id", "index", "name", "wire_index")

    def __init__(self, index: int, wire_index: int | None, given_id: str | None, name: str) -> None:
        self.index = index
        self.wire_index = wire_index
        self.given_id = given_id
        self.name = name


class ToolCallIdentity:
    """Which call a ``delta.tool_calls`` fragment belongs to (pure).

    OpenAI sends ``index`` and ``id`` on a call's first fragment and only ``index``
    after. Compatible servers differ: Ollama numbers every call ``index: 0``, Gemini's
    endpoint sends no ``index``. So an ``id`` not seen before starts a new call (unless
    the call at that index never had one), a fragment without an ``id`` continues the
    latest call at its ``index``, and one with neither continues the latest call. A
    ``function.name`` that arrives after the first fragment names the call then.
    """

    __slots__ = ("_by_id", "_calls", "_latest_at")

    def __init__(self) -> None:
        self._calls: list[_Call] = []
        self._by_id: dict[str, _Call] = {}
        self._latest_at: dict[int | None, _Call] = {}

    def fragment(self, call: Any) -> list[StreamEvent]:
        wire_index = getattr(call, "index", None)
        if not isinstance(wire_index, int):
            wire_index = None
        given_id = getattr(call, "id", None) or None
        function = getattr(call, "function", None)
        name = (getattr(function, "name", None) or "") if function is not None else ""
        arguments = (getattr(function, "arguments", None) or "") if function is not None else ""

        target = self._find(wire_index, given_id)
        out: list[StreamEvent] = []
        if target is None:
            target = _Call(len(self._calls), wire_index, given_id, name)
            self._calls.append(target)
            out.append(ToolCallStart(target.index, given_id or f"call_{target.index}", name))
        elif name and not target.name:
            target.name = name
            out.append(ToolCallStart(target.index, "", name))
        if given_id is not None and target.given_id is None:
            target.given_id = given_id
        if given_id is not None:
            self._by_id[given_id] = target
        self._latest_at[wire_index] = target
        if arguments:
            out.append(ToolCallDelta(target.index, arguments))
        return out

    def _find(self, wire_index: int | None, given_id: str | None) -> _Call | None:
        if given_id is not None:
            known = self._by_id.get(given_id)
            if known is not None:
                return known
            latest = self._latest_at.get(wire_index)
            if latest is not None and latest.given_id is None and wire_index is not None:
                return latest
            return None
        if wire_index is not None:
            return self._latest_at.get(wire_index)
        return self._calls[-1] if self._calls else None

    def end_all(self) -> list[StreamEvent]:
        return [ToolCallEnd(call.index) for call in self._calls]


def _reasoning_text(delta: Any) -> str:
    # vLLM, DeepSeek and Ollama stream reasoning in a field the OpenAI schema lacks.
    for name in ("reasoning_content", "reasoning"):
        value = getattr(delta, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


class OpenAIStreamTranslator:
    """Turns chat-completion chunks into common events.

    Chat Completions has no per-call end marker: every call is closed when
    ``finish_reason`` arrives. The stop event is emitted by :meth:`finish`, after
    the usage chunk that follows ``finish_reason``: ``refusal`` when the model
    streamed a refusal (``delta.refusal``) instead of an answer. Reasoning from
    compatible servers is unsigned: committed, never sent back.
    """

    __slots__ = ("_finish_reason", "_reasoning", "_reasoning_open", "_refused", "_tools")

    def __init__(self) -> None:
        self._tools = ToolCallIdentity()
        self._finish_reason: str | None = None
        self._refused = False
        #: index of the latest reasoning block; one opens each time reasoning resumes
        self._reasoning = -1
        self._reasoning_open = False

    @property
    def stopped(self) -> bool:
        """``finish_reason`` arrived: the turn's content is complete."""
        return self._finish_reason is not None

    def _close_reasoning(self) -> list[StreamEvent]:
        if not self._reasoning_open:
            return []
        self._reasoning_open = False
        return [ReasoningEnd(self._reasoning)]

    def feed(self, chunk: Any) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) != 0:
                continue  # n > 1 is not supported: one turn, one choice
            delta = choice.delta
            if delta is not None:
                reasoning = _reasoning_text(delta)
                if reasoning:
                    if not self._reasoning_open:
                        self._reasoning += 1
                        self._reasoning_open = True
                    out.append(ReasoningDelta(self._reasoning, text=reasoning))
                refusal = getattr(delta, "refusal", None)
                if delta.content or refusal or delta.tool_calls:
                    out.extend(self._close_reasoning())
                if isinstance(refusal, str) and refusal:
                    self._refused = True
                    out.append(RefusalDelta(refusal))
                if delta.content:
                    out.append(TextDelta(delta.content))
                for call in delta.tool_calls or ():
                    out.extend(self._tools.fragment(call))
            if choice.finish_reason:
                self._finish_reason = choice.finish_reason
                out.extend(self._close_reasoning())
                out.extend(self._tools.end_all())
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            prompt = usage.prompt_tokens or 0
            details = getattr(usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) or 0
            # ``prompt_tokens`` includes the cached part; Usage keeps them apart.
            out.append(UsageEvent(prompt - cached, usage.completion_tokens or 0, cached, 0))
        return out

    def finish(self) -> list[StreamEvent]:
        if self._finish_reason is None:
            return []
        reason = "refusal" if self._refused else normalise_finish_reason(self._finish_reason)
        return [StopEvent(reason)]
