"""The OpenAI-compatible Chat Completions provider, on the ``openai`` SDK's async streaming.

``base_url`` points it at any compatible server (vLLM, Ollama, LiteLLM ...).
The SDK is imported lazily so the package works without the ``openai`` extra.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal

from awaken_s3.providers.api_keys import ApiKey, reveal
from awaken_s3.providers.classify import classify_http_error, error_fields
from awaken_s3.providers.hints import parse_retry_after
from awaken_s3.providers.openai_format import OpenAIStreamTranslator, build_openai_request
from awaken_s3.providers.prefill import PrefillOverride, resolve_prefill
from awaken_s3.providers.stream_state import ends_with_assistant, stream_from_sdk
from awaken_s3.providers.unreachable import http_unreachable
from awaken_s3.streaming.errors import (
    ConnectionDropped,
    ProviderError,
    StreamStalled,
)
from awaken_s3.streaming.events import StreamEvent
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities

if TYPE_CHECKING:
    from openai import AsyncOpenAI

NAME = "openai"


def _import_sdk() -> Any:
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "OpenAIChatProvider needs the openai SDK: pip install 'awaken-s3[openai]'"
        ) from exc
    return openai


def _no_prefill(model: str) -> bool:
    # Chat Completions answers a trailing assistant message with a new turn
    # instead of continuing it.
    return False


def _status_hint(code: str | None) -> int | None:
    # vLLM and other compatible servers put the HTTP status in ``code``.
    return int(code) if code is not None and code.isdigit() else None


def map_openai_exception(exc: BaseException, *, sent_prefill: bool) -> ProviderError | None:
    """The typed error for an SDK exception; ``None`` if it is not one."""
    openai = _import_sdk()
    if isinstance(exc, openai.APIStatusError):
        error_type, code, message = error_fields(exc.body)
        return classify_http_error(
            status=exc.status_code,
            error_type=error_type,
            error_code=code,
            message=message or str(exc),
            provider=NAME,
            retry_after=parse_retry_after(dict(exc.response.headers)),
            sent_prefill=sent_prefill,
        )
    if isinstance(exc, openai.APIConnectionError):
        # Before the timeout: a connect timeout is an APITimeoutError too.
        unreachable = http_unreachable(exc, provider=NAME)
        if unreachable is not None:
            return unreachable
    if isinstance(exc, openai.APITimeoutError):
        return StreamStalled(f"no data within the idle timeout: {exc}", provider=NAME)
    if isinstance(exc, openai.APIConnectionError):
        return ConnectionDropped(f"connection to the server lost: {exc}", provider=NAME)
    if isinstance(exc, openai.APIError):
        # An ``error`` object inside the stream: no HTTP status, only the body.
        error_type, code, message = error_fields(exc.body)
        return classify_http_error(
            status=_status_hint(code),
            error_type=error_type,
            error_code=None if _status_hint(code) is not None else code,
            message=message or str(exc),
            provider=NAME,
            sent_prefill=sent_prefill,
        )
    return None


class OpenAIChatProvider:
    """Streams a turn from an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    The SDK's own retries are switched off (``max_retries=0``) because the turn
    runner owns retry policy: SDK retries would repeat a request behind the
    runner's back, double its delays and hide attempts from the retry count.

    ``max_tokens_param`` defaults to ``max_completion_tokens`` on OpenAI itself
    (its reasoning models refuse ``max_tokens``) and to ``max_tokens`` when
    ``base_url`` points elsewhere (what compatible servers have long accepted).

    ``extra`` holds fields sent with every request; a request's own ``extra`` overrides
    them. vLLM's ``continue_final_message`` (with ``add_generation_prompt``) in either
    is sent only on a request that ends with an assistant message.
    """

    name = NAME

    def __init__(
        self,
        *,
        client: AsyncOpenAI | None = None,
        api_key: ApiKey | None = None,
        base_url: str | None = None,
        idle_timeout: float = 60.0,
        connect_timeout: float = 10.0,
        prefill: PrefillOverride = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self._prefill = prefill
        self._extra = dict(extra or {})
        if max_tokens_param is None:
            max_tokens_param = "max_completion_tokens" if base_url is None else "max_tokens"
        self._max_tokens_param = max_tokens_param
        self._owns_client = client is None
        if client is None:
            openai = _import_sdk()
            key = reveal(api_key)
            client = openai.AsyncOpenAI(
                # Local compatible servers need no key, but the SDK insists on one.
                api_key=key if key is not None or base_url is None else "unused",
                base_url=base_url,
                max_retries=0,
                # ``read`` is the longest gap between two chunks: the idle-stall timeout.
                timeout=openai.Timeout(
                    connect=connect_timeout, read=idle_timeout, write=30.0, pool=connect_timeout
                ),
            )
        self._client = client

    def __repr__(self) -> str:
        return f"OpenAIChatProvider(base_url={str(self._client.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP client this provider built (a caller's client stays open)."""
        if self._owns_client:
            await self._client.close()

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(
            assistant_prefill=resolve_prefill(model, self._prefill, _no_prefill)
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        sent_prefill = ends_with_assistant(request.messages)
        params = build_openai_request(
            request, max_tokens_param=self._max_tokens_param, defaults=self._extra
        )
        # aclosing: an abandoned stream closes its HTTP response now, not at GC.
        async with aclosing(
            stream_from_sdk(
                lambda: self._client.chat.completions.create(**params, stream=True),
                OpenAIStreamTranslator(),
                map_error=lambda exc: map_openai_exception(exc, sent_prefill=sent_prefill),
                ended_early="the chat completion stream ended before a finish_reason",
                provider=NAME,
            )
        ) as events:
            async for event in events:
                yield event
