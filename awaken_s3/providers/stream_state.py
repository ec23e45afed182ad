"""What the three stream translators share.

Providers number tool calls differently (Anthropic and Bedrock use the content
block index, which counts text blocks too; OpenAI gives each call its own
index). The common events use a 0-based tool-call index in stream order.
:func:`translate_stream` is the one loop that pumps an SDK stream through a
translator and maps its failures; the adapters differ only in what they pass.
"""

from __future__ import annotations

from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, Final, Protocol, TypeVar

from awaken_s3.messages import Message, TextBlock
from awaken_s3.streaming.errors import ConnectionDropped, ProviderError, StreamStalled
from awaken_s3.streaming.events import StreamEvent
from awaken_s3.streaming.provider import ModelRequest

_Item = TypeVar("_Item", contravariant=True)

#: Claude's stop reasons, as both the Messages API and Bedrock Converse name them
_CLAUDE_STOP_REASONS: Final = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    # The context window ran out mid-answer: a length stop like max_tokens.
    "model_context_window_exceeded": "max_tokens",
    # The run fails visibly instead of taking a cut-off answer for a final one.
    "refusal": "refusal",
    # A long server-tool turn paused: the run re-sends it so the model continues.
    "pause_turn": "pause_turn",
}


def normalise_stop_reason(reason: str | None) -> str:
    """Anthropic/Bedrock stop reason -> end_turn / tool_use / max_tokens / stop_sequence /
    refusal / pause_turn / other.

    Bedrock's guardrail_intervened and content_filtered fall under "other".
    """
    return _CLAUDE_STOP_REASONS.get(reason or "", "other")


def merge_fields(base: Mapping[str, Any], *layers: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by each layer in turn; dict values merge one level deep, so a
    provider's ``extra_body`` and a request's ``extra_body`` both survive."""
    merged = dict(base)
    for layer in layers:
        for key, value in layer.items():
            current = merged.get(key)
            if isinstance(current, Mapping) and isinstance(value, Mapping):
                merged[key] = {**current, **value}
            else:
                merged[key] = value
    return merged


def request_fields(request: ModelRequest, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The extra fields of one request: the provider's defaults, the request's ``extra``,
    and its ``continuation_extra`` when it ends with an assistant message."""
    layers = [request.extra]
    if ends_with_assistant(request.messages):
        layers.append(request.continuation_extra)
    return merge_fields(defaults, *layers)


def thinking_enabled(config: object) -> bool:
    """Whether a ``thinking`` (or Bedrock ``reasoning_config``) setting turns it on."""
    if not isinstance(config, Mapping):
        return False
    return config.get("type") not in (None, "disabled")


class StreamTranslator(Protocol[_Item]):
    """Turns one provider's stream items into common events (pure)."""

    @property
    def stopped(self) -> bool:
        """The provider's stop marker arrived: the turn's content is whole."""
        ...

    def feed(self, item: _Item) -> Iterable[StreamEvent]: ...

    def finish(self) -> Iterable[StreamEvent]: ...


async def translate_stream(
    items: AsyncIterator[_Item],
    translator: StreamTranslator[_Item],
    *,
    map_error: Callable[[Exception], ProviderError | None],
    ended_early: str,
    provider: str,
) -> AsyncIterator[StreamEvent]:
    """Pump ``items`` through ``translator``, raising typed provider errors.

    ``map_error`` returns None for an exception that is not the provider's (it
    propagates as is). A stream that ends before its stop marker is a dropped
    connection; a drop or stall *after* it lost only trailing metadata (usage),
    so the turn still ends normally.
    """
    while True:
        try:
            item = await items.__anext__()
        except StopAsyncIteration:
            break
        except Exception as exc:
            mapped = map_error(exc)
            if mapped is None:
                raise
            if translator.stopped and isinstance(mapped, ConnectionDropped | StreamStalled):
                break
            raise mapped from exc
        for event in translator.feed(item):
            yield event
    if not translator.stopped:
        raise ConnectionDropped(ended_early, provider=provider)
    for event in translator.finish():
        yield event


class ToolCallIndexer:
    """Hands out 0-based tool-call indices in the order calls start."""

    __slots__ = ("_indices", "_open")

    def __init__(self) -> None:
        self._indices: dict[Hashable, int] = {}
        self._open: dict[Hashable, int] = {}

    def start(self, key: Hashable) -> int:
        index = len(self._indices)
        self._indices[key] = index
        self._open[key] = index
        return index

    def index_of(self, key: Hashable) -> int | None:
        return self._indices.get(key)

    def is_open(self, key: Hashable) -> bool:
        return key in self._open

    def end(self, key: Hashable) -> int | None:
        """Close the call at ``key``; ``None`` when it is not an open tool call."""
        return self._open.pop(key, None)

    def open_keys(self) -> list[Hashable]:
        """The keys of the open calls, in index order."""
        return sorted(self._open, key=self._open.__getitem__)

    def end_all(self) -> list[int]:
        """Close every open call, in index order."""
        indices = sorted(self._open.values())
        self._open.clear()
        return indices


def ends_with_assistant(messages: Sequence[Message]) -> bool:
    """Whether the request carries a prefill (a trailing assistant message)."""
    return bool(messages) and messages[-1].role == "assistant"


def without_empty_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Wire messages (``{"role", "content": [...]}``) with none left empty.

    Anthropic and Bedrock refuse a message whose content list is empty, and the adapters drop
    the blocks the provider would refuse (blank text, unsigned reasoning, another provider's
    blocks), which can empty a message the thread mended as sendable. Such a message is left
    out, and the messages of one role it separated are sent as one (Bedrock refuses two in a
    row; Anthropic would merge them itself).
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if not message["content"]:
            continue
        if out and out[-1]["role"] == message["role"]:
            out[-1] = {**out[-1], "content": [*out[-1]["content"], *message["content"]]}
        else:
            out.append(message)
    return out


def rstrip_prefill(messages: Sequence[Message]) -> list[Message]:
    """Drop trailing whitespace from a trailing assistant message's last text block.

    Claude rejects a prefill that ends in whitespace; the model emits the space
    itself when it continues, and the runner checks the seam.
    """
    result = list(messages)
    if not ends_with_assistant(result):
        return result
    last = result[-1]
    blocks = list(last.content)
    if blocks and isinstance(blocks[-1], TextBlock):
        stripped = blocks[-1].text.rstrip()
        if stripped:
            blocks[-1] = TextBlock(text=stripped)
        else:
            blocks.pop()
    if blocks:
        result[-1] = Message(role="assistant", content=tuple(blocks))
    else:
        result.pop()
    return result


class _SdkStream(Protocol):
    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def close(self) -> None: ...


async def stream_from_sdk(
    open_stream: Callable[[], Awaitable[_SdkStream]],
    translator: StreamTranslator[Any],
    *,
    map_error: Callable[[Exception], ProviderError | None],
    ended_early: str,
    provider: str,
) -> AsyncGenerator[StreamEvent, None]:
    """Open an HTTP SDK's stream (Anthropic, OpenAI), translate it, and always close it.

    A failure to open (a 4xx/5xx/429 before any byte) is mapped like a failure mid-stream.
    """
    try:
        sdk_stream = await open_stream()
    except Exception as exc:
        mapped = map_error(exc)
        if mapped is None:
            raise
        raise mapped from exc
    try:
        async for event in translate_stream(
            sdk_stream.__aiter__(),
            translator,
            map_error=map_error,
            ended_early=ended_early,
            provider=provider,
        ):
            yield event
    finally:
        await sdk_stream.close()
