"""The Anthropic Messages API provider, on the ``anthropic`` SDK's async streaming.

The SDK is imported lazily so the package works without the ``anthropic`` extra.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from awaken_s3.providers.anthropic_format import AnthropicStreamTranslator, build_anthropic_request
from awaken_s3.providers.api_keys import ApiKey, reveal
from awaken_s3.providers.classify import classify_http_error, error_fields
from awaken_s3.providers.hints import parse_retry_after
from awaken_s3.providers.prefill import PrefillOverride, default_claude_prefill, resolve_prefill
from awaken_s3.providers.stream_state import (
    ends_with_assistant,
    stream_from_sdk,
    thinking_enabled,
)
from awaken_s3.providers.unreachable import http_unreachable, httpx_modules
from awaken_s3.streaming.errors import (
    ConnectionDropped,
    ProviderError,
    ServerError,
    StreamStalled,
)
from awaken_s3.streaming.events import StreamEvent
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

NAME = "anthropic"


def _import_sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "AnthropicProvider needs the anthropic SDK: pip install 'awaken-s3[anthropic]'"
        ) from exc
    return anthropic


def _transport_errors() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """(timeouts, transport errors) of the HTTP library under the SDK.

    The SDK leaves mid-stream read errors unwrapped. SDK 2.x runs on ``httpx2``,
    earlier releases (still allowed by the extra) on ``httpx``.
    """
    modules = httpx_modules()
    return (
        tuple(module.TimeoutException for module in modules),
        tuple(module.TransportError for module in modules),
    )


def map_anthropic_exception(exc: BaseException, *, sent_prefill: bool) -> ProviderError | None:
    """The typed error for an SDK or transport exception; ``None`` if it is not one."""
    anthropic = _import_sdk()
    timeouts, transports = _transport_errors()

    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        error_type, code, message = error_fields(exc.body)
        # An in-stream ``error`` event is raised on the 200 response: only its
        # body's type says what happened.
        in_stream = status == 200
        return classify_http_error(
            status=None if in_stream else status,
            error_type=error_type,
            error_code=code,
            message=message or str(exc),
            provider=NAME,
            retry_after=None if in_stream else parse_retry_after(dict(exc.response.headers)),
            sent_prefill=sent_prefill,
        )
    if isinstance(exc, anthropic.APIConnectionError):
        # Before the timeout: a connect timeout is an APITimeoutError too.
        unreachable = http_unreachable(exc, provider=NAME)
        if unreachable is not None:
            return unreachable
    if isinstance(exc, (anthropic.APITimeoutError, *timeouts)):
        return StreamStalled(f"no data within the idle timeout: {exc}", provider=NAME)
    if isinstance(exc, (anthropic.APIConnectionError, *transports)):
        return ConnectionDropped(f"connection to Anthropic lost: {exc}", provider=NAME)
    if isinstance(exc, anthropic.APIError):
        return ServerError(f"unexpected Anthropic API error: {exc}", provider=NAME)
    return None


class AnthropicProvider:
    """Streams a turn from the Anthropic Messages API.

    Pass ``client`` to reuse a configured ``AsyncAnthropic``; otherwise one is
    built with ``api_key``/``base_url``. The SDK's own retries are switched off
    (``max_retries=0``) because the turn runner owns retry policy: SDK retries
    would repeat a request behind the runner's back, double its delays and hide
    the attempts from the checkpoint's retry count.

    ``extra`` holds fields sent with every request (``{"thinking": {"type": "adaptive"}}``
    turns extended thinking on for every run); a request's own ``extra`` overrides them.
    With thinking on, prefill defaults to off: the API refuses an assistant prefill then.
    """

    name = NAME

    def __init__(
        self,
        *,
        client: AsyncAnthropic | None = None,
        api_key: ApiKey | None = None,
        base_url: str | None = None,
        idle_timeout: float = 60.0,
        connect_timeout: float = 10.0,
        prefill: PrefillOverride = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self._prefill = prefill
        self._extra = dict(extra or {})
        self._owns_client = client is None
        if client is None:
            anthropic = _import_sdk()
            client = anthropic.AsyncAnthropic(
                api_key=reveal(api_key),
                base_url=base_url,
                max_retries=0,
                # ``read`` is the longest gap between two chunks: the idle-stall timeout.
                timeout=anthropic.Timeout(
                    connect=connect_timeout, read=idle_timeout, write=30.0, pool=connect_timeout
                ),
            )
        self._client = client

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={str(self._client.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP client this provider built (a caller's client stays open)."""
        if self._owns_client:
            await self._client.close()

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(
            assistant_prefill=resolve_prefill(model, self._prefill, self._default_prefill)
        )

    def _default_prefill(self, model: str) -> bool:
        return not thinking_enabled(self._extra.get("thinking")) and default_claude_prefill(model)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        sent_prefill = ends_with_assistant(request.messages)
        params = build_anthropic_request(request, defaults=self._extra)
        # aclosing: an abandoned stream closes its HTTP response now, not at GC.
        async with aclosing(
            stream_from_sdk(
                lambda: self._client.messages.create(**params, stream=True),
                AnthropicStreamTranslator(),
                map_error=lambda exc: map_anthropic_exception(exc, sent_prefill=sent_prefill),
                ended_early="the Anthropic stream ended before message_stop",
                provider=NAME,
            )
        ) as events:
            async for event in events:
                yield event
