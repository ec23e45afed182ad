"""API Gateway's WebSocket API on the dev server: ``ws://127.0.0.1:PORT/ws``, each connect,
message and disconnect an event for the real socket handler (``awaken_s3.service.socket``),
and the management API its frames come back through (``POST /@connections/{id}``).

What API Gateway does and this mirrors: the ``$connect`` authorizer runs on the handshake (a
refusal is a 401 and no connection; here the dev token, with ``--require-token``), the
``$connect`` route's refusal is a 403; each message goes to the route its ``action`` names,
or ``$default`` (``awaken_s3.service.routes``); ``$disconnect`` runs after the socket closed,
whoever closed it; the management API answers 410 ``GoneException`` for a connection that is
gone. The worker and the socket handler reach it through botocore's own endpoint setting
(``AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI``), as they reach the deployed API: there the
endpoint ends in the stage, here in :attr:`SocketGateway.management_path`, a path with a key
only the processes of this stack are given, which stands for the token botocore cannot send.
With ``--require-token`` the management API takes a request with ``Authorization: Bearer
<token>`` or under that path, nothing else.
Not mirrored: the 10-minute idle and 2-hour connection limits, frame size limits.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import WSMsgType, web

from awaken_s3.dev import apigw
from awaken_s3.dev.functions import LocalFunctions
from awaken_s3.service.routes import SOCKET_TOKEN_PARAMETER, socket_route_key

log = logging.getLogger("awaken_s3.dev")
#: the management API's routes for the stack's own processes (:attr:`management_path`)
MANAGEMENT_PREFIX: Final = "/@management/{key}"


@dataclass
class _Connection:
    socket: web.WebSocketResponse
    connected_at: float
    source_ip: str
    last_active: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _gone() -> web.Response:
    return web.json_response(
        {"message": "the connection is gone"},
        status=410,
        headers={"x-amzn-ErrorType": "GoneException"},
    )


def _unauthorized() -> web.Response:
    return web.json_response({"message": "Unauthorized"}, status=401)


class SocketGateway:
    def __init__(self, functions: LocalFunctions, *, principal: str, token: str | None) -> None:
        self.functions = functions
        self.principal = principal
        self.token = token
        self.connections: dict[str, _Connection] = {}
        self._management_key = secrets.token_urlsafe(24)

    @property
    def management_path(self) -> str:
        """The path the stack's own processes reach the management API under (their
        endpoint is the server's URL and this)."""
        return MANAGEMENT_PREFIX.format(key=self._management_key)

    def _authorized(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        given = request.query.get(SOCKET_TOKEN_PARAMETER, "")
        return hmac.compare_digest(given.encode(), self.token.encode())

    def _manager(self, request: web.Request) -> bool:
        """Whether a management API request may act on connections."""
        key = request.match_info.get("key")
        if key is not None:
            return hmac.compare_digest(key.encode(), self._management_key.encode())
        if self.token is None:
            return True
        given = request.headers.get("Authorization") or ""
        return hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode())

    async def _invoke(self, route: str, connection: str, since: float, **kw: Any) -> int:
        event = apigw.socket_event(
            route, connection, principal=self.principal, connected_at=since, **kw
        )
        try:
            result = await self.functions.invoke("socket", event)
        except Exception as exc:  # the function failed: API Gateway answers the client 500
            log.warning("socket route %s failed: %r", route, exc)
            return 500
        status = result.get("statusCode", 200) if isinstance(result, dict) else 200
        return int(status)

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """``GET /ws``: the handshake, then the connection's messages until it closes."""
        if not self._authorized(request):
            return _unauthorized()
        connection = apigw.connection_id()
        since = time.time()
        source = request.remote or "127.0.0.1"
        status = await self._invoke(
            "$connect", connection, since, query=dict(request.query), source_ip=source
        )
        if status >= 300:
            return web.json_response({"message": "Forbidden"}, status=403)
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self.connections[connection] = _Connection(socket, since, source, since)
        try:
            async for message in socket:
                if message.type != WSMsgType.TEXT:
                    continue
                self.connections[connection].last_active = time.time()
                route = socket_route_key(message.data)
                await self._invoke(route, connection, since, body=message.data, source_ip=source)
        finally:
            self.connections.pop(connection, None)
            await self._invoke("$disconnect", connection, since, source_ip=source)
        return socket

    # -- the management API (``@connections``)

    async def post(self, request: web.Request) -> web.Response:
        if not self._manager(request):
            return _unauthorized()
        connection = self.connections.get(request.match_info["connection_id"])
        data = await request.read()
        if connection is None or connection.socket.closed:
            return _gone()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return web.json_response(
                {"message": "the data is not UTF-8 text"},
                status=400,
                headers={"x-amzn-ErrorType": "BadRequestException"},
            )
        async with connection.lock:  # one frame at a time on a socket
            try:
                await connection.socket.send_str(text)
            except (ConnectionError, RuntimeError):
                return _gone()
        return web.Response(status=200)

    async def delete(self, request: web.Request) -> web.Response:
        if not self._manager(request):
            return _unauthorized()
        connection = self.connections.get(request.match_info["connection_id"])
        if connection is None:
            return _gone()
        await connection.socket.close()
        return web.Response(status=204)

    async def get(self, request: web.Request) -> web.Response:
        if not self._manager(request):
            return _unauthorized()
        connection = self.connections.get(request.match_info["connection_id"])
        if connection is None:
            return _gone()
        iso = "%Y-%m-%dT%H:%M:%S.000Z"
        body = {
            "ConnectedAt": time.strftime(iso, time.gmtime(connection.connected_at)),
            "LastActiveAt": time.strftime(iso, time.gmtime(connection.last_active)),
            "Identity": {"SourceIp": connection.source_ip},
        }
        return web.Response(text=json.dumps(body), content_type="application/json")

    async def close_all(self) -> None:
        for connection in list(self.connections.values()):
            await connection.socket.close()
