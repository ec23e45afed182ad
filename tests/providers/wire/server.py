"""A scripted HTTP server on 127.0.0.1 that replays provider wire bytes.

Each request takes the next scripted response. A response is a status, headers
and a list of body parts: raw bytes (each part is flushed on its own, so the
client sees real chunk boundaries), ``DROP`` (abort the TCP connection mid-body)
``STALL`` (send nothing until the test ends) or ``WAIT`` (send the rest once the test calls
:meth:`WireServer.proceed`). A response ends with a complete body unless a ``DROP`` or
``STALL`` cuts it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from aiohttp import web

from awaken_s3.local.ports import free_port


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


DROP: Final = _Marker("DROP")
STALL: Final = _Marker("STALL")
WAIT: Final = _Marker("WAIT")

Part = bytes | _Marker
_P = TypeVar("_P")


@dataclass
class Scripted:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    parts: list[Part] = field(default_factory=list)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class WireServer:
    def __init__(self) -> None:
        self.script: list[Scripted] = []
        self.received: list[Received] = []
        #: request validation, as the real API does it: a response here (an error)
        #: answers the request instead of the next scripted one
        self.validate: Callable[[Received], Scripted | None] | None = None
        self._release = asyncio.Event()
        self._proceed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._providers: list[Any] = []
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def track(self, provider: _P) -> _P:
        """Close ``provider`` (its HTTP client) when the server stops."""
        self._providers.append(provider)
        return provider

    def proceed(self) -> None:
        """Let every response held at a ``WAIT`` go on (on the server's event loop)."""
        self._proceed.set()

    def push(self, *responses: Scripted) -> None:
        self.script.extend(responses)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        received = Received(
            request.method,
            request.path,
            {k.lower(): v for k, v in request.headers.items()},
            body,
        )
        self.received.append(received)
        rejected = self.validate(received) if self.validate is not None else None
        if rejected is not None:
            scripted = rejected
        elif not self.script:
            return web.json_response({"message": "no scripted response"}, status=599)
        else:
            scripted = self.script.pop(0)
        response = web.StreamResponse(status=scripted.status, headers=scripted.headers)
        await response.prepare(request)
        for part in scripted.parts:
            if part is DROP:
                # Close the TCP connection in the middle of the chunked body. A
                # close (FIN after the buffered bytes) rather than an abort (RST)
                # keeps the test deterministic: an RST may discard bytes the
                # client has not read yet.
                assert request.transport is not None
                request.transport.close()
                return response
            if part is STALL:
                await self._release.wait()
                return response
            if part is WAIT:
                await self._proceed.wait()
                continue
            assert isinstance(part, bytes)
            await response.write(part)
            # Let each part leave as its own TCP segment, like a real stream.
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        self.port = free_port()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()

    async def stop(self) -> None:
        self._release.set()
        self._proceed.set()
        for provider in self._providers:
            await provider.aclose()
        if self._runner is not None:
            await self._runner.cleanup()
