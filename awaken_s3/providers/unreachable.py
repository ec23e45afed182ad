"""An endpoint no connection reached: the URL and the cause, read from the SDKs' exceptions.

A connection refused, a host name that does not resolve, a TLS handshake that fails and a
connect timeout all mean the request never reached the provider. The SDKs report them as
they report a connection lost mid-stream (``APIConnectionError``, botocore's
``EndpointConnectionError``), so each adapter asks here first, from the exception's real
chain, whether a connection was made at all:

* openai and anthropic wrap httpx's ``ConnectError`` or ``ConnectTimeout`` (``httpx2`` under
  current SDKs) as the ``__cause__`` of their ``APIConnectionError`` / ``APITimeoutError``,
  which keeps the request (``.request.url``);
* aiobotocore raises ``EndpointConnectionError`` with aiohttp's ``ClientConnectorError`` (or
  a ``socket.gaierror``) as ``kwargs["error"]``, ``ConnectTimeoutError`` for a connect
  timeout and botocore's ``SSLError`` for a failed handshake, each with
  ``kwargs["endpoint_url"]``.

The URL in the message loses its user info, query and fragment: a key there would otherwise
reach the run's stored error and the logs.
"""

from __future__ import annotations

import importlib
import os
import socket
import ssl
from types import ModuleType
from urllib.parse import urlsplit, urlunsplit

from awaken_s3.causes import exception_chain
from awaken_s3.streaming.errors import ProviderUnreachable

#: what a connect timeout says: no exception in its chain names it better
CONNECT_TIMEOUT = "no connection within the connect timeout"


def httpx_modules() -> list[ModuleType]:
    """The HTTP libraries under the SDKs: ``httpx2`` (SDK 2.x and later), ``httpx`` (older
    releases the extras still allow)."""
    modules = []
    for name in ("httpx2", "httpx"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            continue
    return modules


def safe_url(url: str) -> str:
    """``url`` without what may hold a secret: user info, query and fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def connect_cause(exc: BaseException) -> str:
    """Why no connection was made, in a few words, from the innermost telling exception."""
    links = list(exception_chain(exc))
    for link in links:
        if isinstance(link, socket.gaierror):
            return f"the host name did not resolve ({link.strerror})"
    tls = [link for link in links if isinstance(link, ssl.SSLError)]
    if tls:
        for link in tls:
            if isinstance(link, ssl.SSLCertVerificationError) and link.verify_message:
                return f"the TLS certificate was refused ({link.verify_message})"
        reason = next((r for r in (getattr(link, "reason", None) for link in tls) if r), None)
        return f"the TLS handshake failed ({reason or tls[-1]})"
    for link in links:
        if isinstance(link, TimeoutError):
            return CONNECT_TIMEOUT
        if isinstance(link, OSError) and link.errno is not None and link.errno > 0:
            return os.strerror(link.errno).lower()
    innermost = links[-1]
    return str(innermost) or type(innermost).__name__


def unreachable(url: str | None, cause: str, *, provider: str) -> ProviderUnreachable:
    """The error for an endpoint no connection reached."""
    shown = safe_url(url) if url else None
    where = shown or f"the {provider} endpoint"
    error = ProviderUnreachable(f"cannot connect to {where}: {cause}", provider=provider)
    error.url = shown
    return error


def http_unreachable(exc: BaseException, *, provider: str) -> ProviderUnreachable | None:
    """For an openai/anthropic SDK error whose request never connected; None otherwise."""
    modules = httpx_modules()
    timeouts = tuple(module.ConnectTimeout for module in modules)
    refused = tuple(module.ConnectError for module in modules)
    cause = exc.__cause__
    if not isinstance(cause, timeouts + refused):
        return None
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    reason = CONNECT_TIMEOUT if isinstance(cause, timeouts) else connect_cause(cause)
    return unreachable(str(url) if url is not None else None, reason, provider=provider)
