"""One interface over the three wire formats, for tests that run every adapter the same way.

A dialect builds scripted responses (complete turns, interrupted streams, errors)
in its provider's real wire format, builds the provider pointed at the server,
and reads back what a recorded request asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from awaken_s3.providers.anthropic import AnthropicProvider
from awaken_s3.providers.bedrock import BedrockConverseProvider
from awaken_s3.providers.openai import OpenAIChatProvider
from awaken_s3.providers.prefill import PrefillOverride
from awaken_s3.streaming.provider import Provider
from tests.providers.wire import anthropic_wire as aw
from tests.providers.wire import bedrock_wire as bw
from tests.providers.wire import openai_wire as ow
from tests.providers.wire.server import Part, Received, Scripted, WireServer

API_KEY = "sk-wire-test-KEY-7f3a9c"
PREFILL_REJECTION = (
    "This model does not support assistant message prefill. "
    "The conversation must end with a user message."
)

Call = tuple[str, str, list[str], bool]  # id, name, argument fragments, closed


@dataclass(frozen=True)
class Message:
    role: str
    text: str


class Dialect:
    name: str
    #: a model whose default is "no prefill"
    model: str

    def provider(
        self,
        wire: WireServer,
        *,
        idle_timeout: float = 5.0,
        prefill: PrefillOverride = None,
        extra: dict[str, Any] | None = None,
    ) -> Provider:
        return wire.track(
            self.build(wire.url, idle_timeout=idle_timeout, prefill=prefill, extra=extra)
        )

    def build(
        self,
        url: str,
        *,
        idle_timeout: float = 5.0,
        prefill: PrefillOverride = None,
        extra: dict[str, Any] | None = None,
    ) -> Provider:
        """The adapter pointed at a wire server (the caller closes it)."""
        raise NotImplementedError

    # -- stream pieces (an interrupted stream is pieces without an end) --
    def start(self) -> list[Part]:
        raise NotImplementedError

    def text(self, fragments: list[str]) -> list[Part]:
        raise NotImplementedError

    def tools(self, calls: list[Call], *, first_block: int) -> list[Part]:
        raise NotImplementedError

    def end(self, stop: str) -> list[Part]:
        raise NotImplementedError

    def stream(self, *pieces: Sequence[Part]) -> Scripted:
        raise NotImplementedError

    def overloaded_in_stream(self) -> Part:
        raise NotImplementedError

    def throttled(self, retry_after: str) -> Scripted:
        raise NotImplementedError

    def bad_request(self, message: str = "invalid max_tokens") -> Scripted:
        raise NotImplementedError

    def text_turn(self, fragments: list[str]) -> Scripted:
        return self.stream(self.start(), self.text(fragments), self.end("end_turn"))

    # -- reading requests back --
    def messages(self, received: Received) -> list[Message]:
        """(role, text) of every message sent, tool blocks ignored."""
        raise NotImplementedError


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


class AnthropicDialect(Dialect):
    name = "anthropic"
    model = "claude-opus-4-6"

    def build(
        self,
        url: str,
        *,
        idle_timeout: float = 5.0,
        prefill: PrefillOverride = None,
        extra: dict[str, Any] | None = None,
    ) -> Provider:
        return AnthropicProvider(
            api_key=API_KEY, base_url=url, idle_timeout=idle_timeout, prefill=prefill, extra=extra
        )

    def start(self) -> list[Part]:
        return [aw.message_start()]

    def text(self, fragments: list[str]) -> list[Part]:
        return list(aw.text_block(0, fragments)[:-1])  # the block stays open

    def text_turn(self, fragments: list[str]) -> Scripted:
        return self.stream(self.start(), aw.text_block(0, fragments), self.end("end_turn"))

    def tools(self, calls: list[Call], *, first_block: int) -> list[Part]:
        # The API closes the text block before a tool block opens.
        parts: list[Part] = [aw.block_stop(0)] if first_block > 0 else []
        for offset, (call_id, name, fragments, closed) in enumerate(calls):
            index = first_block + offset
            parts.append(aw.tool_start(index, call_id, name))
            parts.extend(aw.tool_delta(index, f) for f in fragments)
            if closed:
                parts.append(aw.block_stop(index))
        return parts

    def end(self, stop: str) -> list[Part]:
        return list(aw.message_end(stop))

    def stream(self, *pieces: Sequence[Part]) -> Scripted:
        return aw.stream(*[p for piece in pieces for p in piece])

    def overloaded_in_stream(self) -> Part:
        return aw.in_stream_error("overloaded_error", "Overloaded")

    def throttled(self, retry_after: str) -> Scripted:
        return aw.error_response(429, "rate_limit_error", "slow", {"retry-after": retry_after})

    def bad_request(self, message: str = "invalid max_tokens") -> Scripted:
        return aw.error_response(400, "invalid_request_error", message)

    def messages(self, received: Received) -> list[Message]:
        return [Message(m["role"], _text_of(m["content"])) for m in received.json()["messages"]]


class OpenAIDialect(Dialect):
    name = "openai"
    model = ow.MODEL

    def build(
        self,
        url: str,
        *,
        idle_timeout: float = 5.0,
        prefill: PrefillOverride = None,
        extra: dict[str, Any] | None = None,
    ) -> Provider:
        return OpenAIChatProvider(
            api_key=API_KEY,
            base_url=f"{url}/v1",
            idle_timeout=idle_timeout,
            prefill=prefill,
            extra=extra,
        )

    def start(self) -> list[Part]:
        return [ow.role()]

    def text(self, fragments: list[str]) -> list[Part]:
        return [ow.text(f) for f in fragments]

    def tools(self, calls: list[Call], *, first_block: int) -> list[Part]:
        # Chat Completions has no per-call close: "closed" means nothing here.
        parts: list[Part] = []
        for index, (call_id, name, fragments, _closed) in enumerate(calls):
            parts.append(ow.tool_start(index, call_id, name))
            parts.extend(ow.tool_args(index, f) for f in fragments)
        return parts

    def end(self, stop: str) -> list[Part]:
        reason = {"end_turn": "stop", "tool_use": "tool_calls"}[stop]
        return [ow.finish(reason), ow.usage(10, 5), ow.DONE]

    def stream(self, *pieces: Sequence[Part]) -> Scripted:
        return ow.stream(*[p for piece in pieces for p in piece])

    def overloaded_in_stream(self) -> Part:
        return ow.in_stream_error("server_error", "The server is overloaded")

    def throttled(self, retry_after: str) -> Scripted:
        return ow.error_response(
            429,
            "requests",
            "slow",
            code="rate_limit_exceeded",
            headers={"retry-after": retry_after},
        )

    def bad_request(self, message: str = "invalid max_tokens") -> Scripted:
        return ow.error_response(400, "invalid_request_error", message)

    def messages(self, received: Received) -> list[Message]:
        return [
            Message(m["role"], _text_of(m.get("content")))
            for m in received.json()["messages"]
            if m["role"] != "system"
        ]


class BedrockDialect(Dialect):
    name = "bedrock"
    model = bw.MODEL

    def build(
        self,
        url: str,
        *,
        idle_timeout: float = 5.0,
        prefill: PrefillOverride = None,
        extra: dict[str, Any] | None = None,
    ) -> Provider:
        return BedrockConverseProvider(
            endpoint_url=url,
            region_name="us-east-1",
            idle_timeout=idle_timeout,
            prefill=prefill,
            extra=extra,
        )

    def start(self) -> list[Part]:
        return [bw.message_start()]

    def text(self, fragments: list[str]) -> list[Part]:
        return [bw.text(0, f) for f in fragments]

    def tools(self, calls: list[Call], *, first_block: int) -> list[Part]:
        parts: list[Part] = []
        for offset, (call_id, name, fragments, closed) in enumerate(calls):
            index = first_block + offset
            parts.append(bw.tool_start(index, call_id, name))
            parts.extend(bw.tool_input(index, f) for f in fragments)
            if closed:
                parts.append(bw.block_stop(index))
        return parts

    def end(self, stop: str) -> list[Part]:
        return [bw.message_stop(stop), bw.metadata(10, 5)]

    def stream(self, *pieces: Sequence[Part]) -> Scripted:
        return bw.stream(*[p for piece in pieces for p in piece])

    def overloaded_in_stream(self) -> Part:
        return bw.stream_exception("serviceUnavailableException", "try again")

    def throttled(self, retry_after: str) -> Scripted:
        return bw.error_response(429, "ThrottlingException", "slow", {"Retry-After": retry_after})

    def bad_request(self, message: str = "invalid max_tokens") -> Scripted:
        return bw.error_response(400, "ValidationException", message)

    def messages(self, received: Received) -> list[Message]:
        return [Message(m["role"], _text_of(m["content"])) for m in received.json()["messages"]]


DIALECTS: list[Dialect] = [AnthropicDialect(), OpenAIDialect(), BedrockDialect()]


def by_name(name: str) -> Dialect:
    return next(d for d in DIALECTS if d.name == name)
