"""The Bedrock ConverseStream provider, on aioboto3's ``bedrock-runtime`` client.

The default inside AWS: no extra dependency, IAM credentials, no API key.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack
from typing import Any, TypeGuard

import aioboto3
import aiohttp
from aiobotocore.config import AioConfig
from botocore.eventstream import ParserError
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    ReadTimeoutError,
)
from botocore.exceptions import SSLError as BotocoreSSLError

from awaken_s3.providers.bedrock_format import ConverseStreamTranslator, build_converse_request
from awaken_s3.providers.classify import classify_bedrock_error
from awaken_s3.providers.hints import parse_retry_after
from awaken_s3.providers.prefill import PrefillOverride, default_claude_prefill, resolve_prefill
from awaken_s3.providers.stream_state import (
    ends_with_assistant,
    thinking_enabled,
    translate_stream,
)
from awaken_s3.providers.unreachable import CONNECT_TIMEOUT, connect_cause, unreachable
from awaken_s3.streaming.errors import (
    AuthenticationFailed,
    ConnectionDropped,
    ProviderError,
    ServerError,
    StreamStalled,
)
from awaken_s3.streaming.events import StreamEvent
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities

NAME = "bedrock"


def _never_connected(exc: BaseException) -> TypeGuard[BotoCoreError]:
    """aiobotocore's errors for a request that no connection carried: a connect timeout, a
    failed TLS handshake, and an EndpointConnectionError from aiohttp's connector (refused,
    unresolved) rather than from a connection that broke."""
    if isinstance(exc, ConnectTimeoutError | BotocoreSSLError):
        return True
    if isinstance(exc, EndpointConnectionError):
        return isinstance(exc.kwargs.get("error"), aiohttp.ClientConnectorError | socket.gaierror)
    return False


def map_bedrock_exception(exc: BaseException, *, sent_prefill: bool) -> ProviderError | None:
    """The typed error for a botocore/aiohttp exception; ``None`` if it is not one."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        status = meta.get("HTTPStatusCode")
        # An event-stream exception (EventStreamError) has no HTTP status of its own.
        in_stream = status in (None, 200)
        return classify_bedrock_error(
            code=str(error.get("Code", "")),
            message=str(error.get("Message", "")) or str(exc),
            status=None if in_stream else status,
            retry_after=None if in_stream else parse_retry_after(meta.get("HTTPHeaders")),
            sent_prefill=sent_prefill,
        )
    if isinstance(exc, NoCredentialsError):
        return AuthenticationFailed(f"no AWS credentials for Bedrock: {exc}", provider=NAME)
    if _never_connected(exc):
        url = exc.kwargs.get("endpoint_url")
        cause = exc.kwargs.get("error")
        reason = (
            CONNECT_TIMEOUT
            if isinstance(exc, ConnectTimeoutError)
            else connect_cause(cause if isinstance(cause, BaseException) else exc)
        )
        return unreachable(str(url) if url else None, reason, provider=NAME)
    # aiohttp's ServerTimeoutError is both a connection error and a timeout:
    # the timeout checks come first.
    if isinstance(exc, ReadTimeoutError | asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return StreamStalled(f"no data from Bedrock within the idle timeout: {exc}", provider=NAME)
    if isinstance(
        exc,
        ConnectTimeoutError
        | EndpointConnectionError
        | ConnectionClosedError
        | HTTPClientError
        | aiohttp.ClientPayloadError
        | aiohttp.ClientConnectionError
        | ConnectionError,
    ):
        return ConnectionDropped(f"connection to Bedrock lost: {exc}", provider=NAME)
    if isinstance(exc, ParserError):
        return ServerError(f"Bedrock sent a corrupt event-stream frame: {exc}", provider=NAME)
    return None


def client_config(
    *, idle_timeout: float, connect_timeout: float, fresh_connections: bool = False
) -> AioConfig:
    """The botocore config of the provider's client.

    ``total_max_attempts=1`` turns botocore's retries off because the turn runner
    owns retry policy: botocore retries would repeat a request behind the
    runner's back, double its delays and hide attempts from the retry count.
    ``read_timeout`` is the longest gap between two reads: the idle-stall timeout.

    ``fresh_connections``: a new connection for every stream, none kept in a pool. For a
    client that outlives a Lambda invocation: a pooled connection that died while the
    container was frozen would cost the turn an interruption (this client does not retry),
    while a new connection costs one handshake on a call that lasts seconds.
    """
    connector = {"force_close": True, "keepalive_timeout": None} if fresh_connections else None
    return AioConfig(
        connector_args=connector,
        read_timeout=idle_timeout,
        connect_timeout=connect_timeout,
        retries={"total_max_attempts": 1, "mode": "standard"},
    )


class BedrockConverseProvider:
    """Streams a turn from Bedrock's ConverseStream API.

    Pass ``client`` (an open aiobotocore ``bedrock-runtime`` client) to reuse
    one; it should be configured like :func:`client_config`. Otherwise a client
    is opened from ``session`` (default: a new ``aioboto3.Session()``) for each
    stream, so the provider is safe across event loops (a Lambda handler that
    calls ``asyncio.run`` per invocation). ``endpoint_url`` is rarely needed:
    botocore already honours ``AWS_ENDPOINT_URL``.

    ``extra`` holds fields sent with every request, e.g. ``{"additionalModelRequestFields":
    {"thinking": {"type": "enabled", "budget_tokens": 4096}}}`` for extended thinking on
    Claude; a request's own ``extra`` overrides them. With thinking on, prefill defaults to
    off: the model refuses an assistant prefill then.
    """

    name = NAME

    def __init__(
        self,
        *,
        client: Any | None = None,
        session: aioboto3.Session | None = None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        idle_timeout: float = 60.0,
        connect_timeout: float = 10.0,
        prefill: PrefillOverride = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self._client = client
        self._session = session
        self._region_name = region_name
        self._endpoint_url = endpoint_url
        self._config = client_config(idle_timeout=idle_timeout, connect_timeout=connect_timeout)
        self._prefill = prefill
        self._extra = dict(extra or {})

    def __repr__(self) -> str:
        return f"BedrockConverseProvider(region_name={self._region_name!r})"

    async def aclose(self) -> None:
        """Nothing to close: clients opened here live for one stream; a caller's stays open."""

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(
            assistant_prefill=resolve_prefill(model, self._prefill, self._default_prefill)
        )

    def _default_prefill(self, model: str) -> bool:
        fields = self._extra.get("additionalModelRequestFields")
        thinking = isinstance(fields, Mapping) and any(
            thinking_enabled(fields.get(key)) for key in ("thinking", "reasoning_config")
        )
        return not thinking and default_claude_prefill(model)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        sent_prefill = ends_with_assistant(request.messages)
        params = build_converse_request(request, defaults=self._extra)
        async with AsyncExitStack() as stack:
            client: Any = self._client
            if client is None:
                session = self._session or aioboto3.Session()
                client = await stack.enter_async_context(
                    session.client(
                        "bedrock-runtime",
                        region_name=self._region_name,
                        endpoint_url=self._endpoint_url,
                        config=self._config,
                    )
                )
            try:
                response = await client.converse_stream(**params)
            except Exception as exc:
                mapped = map_bedrock_exception(exc, sent_prefill=sent_prefill)
                if mapped is None:
                    raise
                raise mapped from exc
            event_stream = response["stream"]
            stack.callback(event_stream.close)
            async for event in translate_stream(
                event_stream.__aiter__(),
                ConverseStreamTranslator(),
                map_error=lambda exc: map_bedrock_exception(exc, sent_prefill=sent_prefill),
                ended_early="the ConverseStream ended before messageStop",
                provider=NAME,
            ):
                yield event
