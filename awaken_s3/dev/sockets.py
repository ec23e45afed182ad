"""API Gateway's WebSocket API on the dev server: ``ws://127.0.0.1:PORT/ws``, each connect,
message and disconnect an event for the real socket handler (``awaken_s3.service.socket``),
and the management API its frames come back through (``POST /@connections/{id}``).

What API Gateway does and this mirrors: the ``$connect`` authorizer runs on the handshake (a
refusal is a 401 and no connection; here the dev token, with ``--require-token``), the
``$connect`` route's refusal is a 403; each message goes to the route its ``action`` names,
or ``$default`` (``awaken_s3.service.routes``); ``$disconnect`` runs after the socket closed,
whoever closed it; the management API answers 410 ``GoneException`` for a connection that is
gone. The worker and the socket handler reach it through botocore's own endpoint setting
(``AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI``), as they reach the deployed API.
Not mirrored: the 10-minute idle and 2-hour connection limits, frame size limits.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from awaken_s3.dev import apigw
from awaken_s3.dev.functions import LocalFunctions
from awaken_s3.service.routes import SOCKET_TOKEN_PARAMETER, socket_route_key

log = logging.getLogger("awaken_s3.dev")


@dataclass
class _Connection:
    socket: web.WebSocketResponse
    connected_at: float
    source_ip: str
    last_active: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _gone(connection_id: str) -> web.Response:
    return web.json_response(
        {"message": f"connection {connection_id} is gone"},
        status=410,
        headers={"x-amzn-ErrorType": "GoneException"},
    )


class SocketGateway:
    def __init__(self, functions: LocalFunctions, *, principal: str, token: str | None) -> None:
        self.functions = functions
        self.principal = principal
        self.token = token
        self.connections: dict[str, _Connection] = {}

    def _authorized(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        given = request.query.get(SOCKET_TOKEN_PARAMETER, "")
        return hmac.compare_digest(given.encode(), self.token.encode())

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
            return web.json_response({"message": "Unauthorized"}, status=401)
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
        connection_id = request.match_info["connection_id"]
        connection = self.connections.get(connection_id)
        data = await request.read()
        if connection is None or connection.socket.closed:
            return _gone(connection_id)
        async with connection.lock:  # one frame at a time on a socket
            try:
                await connection.socket.send_str(data.decode("utf-8"))
            except (ConnectionError, RuntimeError):
                return _gone(connection_id)
        return web.Response(status=200)

    async def delete(self, request: web.Request) -> web.Response:
        connection = self.connections.get(request.match_info["connection_id"])
        if connection is None:
            return _gone(request.match_info["connection_id"])
        await connection.socket.close()
        return web.Response(status=204)

    async def get(self, request: web.Request) -> web.Response:
        connection = self.connections.get(request.match_info["connection_id"])
        if connection is None:
            return _gone(request.match_info["connection_id"])
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
