"""The provider seam: a request, capabilities, and a stream of events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from awaken_s3.messages import Message
from awaken_s3.streaming.events import StreamEvent


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str
    messages: Sequence[Message]
    system: str | None = None
    tools: Sequence[ToolSpec] = ()
    max_tokens: int = 4096
    temperature: float | None = None
    stop_sequences: Sequence[str] = ()
    #: provider-specific fields merged into every request (a dict value one level deep)
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: ... and these only into a request that ends with an assistant message (a prefill
    #: continuation), e.g. vLLM's ``extra_body={"continue_final_message": True, ...}``
    continuation_extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ProviderCapabilities:
    #: the model continues a trailing assistant message (prefill)
    assistant_prefill: bool


@runtime_checkable
class Provider(Protocol):
    """A model provider.

    ``stream`` yields :mod:`~awaken_s3.streaming.events` and raises a typed
    :class:`~awaken_s3.streaming.errors.ProviderError` on any failure, before
    or during the stream. Callers close the iterator (``aclose``) to abandon it.
    """

    name: str

    def capabilities(self, model: str) -> ProviderCapabilities: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...
