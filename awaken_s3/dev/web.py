"""The dev server's HTTP side, on aiohttp (which the AWS SDK's async client already brings):

* the HTTP API: a request to a declared route becomes an API Gateway HTTP API (payload 2.0)
  event for the real API handler (:mod:`awaken_s3.dev.apigw`), with the dev identity's JWT
  claims; another path is API Gateway's own 404;
* the WebSocket API at ``/ws`` and its management API at ``/@connections/{id}``
  (:mod:`awaken_s3.dev.sockets`);
* ``/dev/...``: what the console needs and the Lambda API must not have (a caller's threads,
  a run's internals, killing the worker that drives a run, a sweep now);
* ``/``: the web console (static files, no build step).

Every request passes :func:`guard` first: it must be addressed to this server and not come
from a web page of another origin (:mod:`awaken_s3.dev.guard` says why).

:class:`WebServer` runs it on an event loop of its own thread, with the project's stores
open on that loop for the ``/dev`` reads and the background tasks the stack gives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib.resources
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from awaken_s3.dev import apigw, tables
from awaken_s3.dev.functions import LocalFunctions
from awaken_s3.dev.guard import host_refusal, origin_refusal
from awaken_s3.dev.sockets import MANAGEMENT_PREFIX, SocketGateway
from awaken_s3.dev.timeline import Timelines
from awaken_s3.dev.workers import Workers
from awaken_s3.ids import InvalidIdError
from awaken_s3.service.scoping import validate_public_run_id
from awaken_s3.service.wiring import Services, open_services
from awaken_s3.settings import StorageSettings

#: API Gateway's payload limit
MAX_BODY: Final = 10 * 1024 * 1024
ISSUER: Final = "https://awaken-dev.local/"
AUDIENCE: Final = "awaken-dev"
_STATIC: Final = {
    "/": ("index.html", "text/html"),
    "/console.js": ("console.js", "text/javascript"),
    "/console.css": ("console.css", "text/css"),
}
#: a task run beside the server with the server loop's stores, cancelled when it stops
Background = Callable[[Services], Coroutine[Any, Any, None]]
_SERVICES: Final = web.AppKey("services", Services)
#: the requests a page elsewhere may make: the console's files (a link from another site to
#: the console is a cross-site navigation)
_PUBLIC_METHODS: Final = frozenset({"GET", "HEAD"})

log = logging.getLogger("awaken_s3.dev")


@dataclass
class DevParts:
    functions: LocalFunctions
    sockets: SocketGateway
    workers: Workers
    timelines: Timelines
    sub: str
    token: str | None
    info: Callable[[], dict[str, Any]]
    background: list[Background] = field(default_factory=list)


def _gateway(answer: apigw.HttpResponse) -> web.Response:
    response = web.Response(status=answer.status, body=answer.body)
    for name, value in answer.headers:
        response.headers.add(name, value)
    return response


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status)


def guard(port: int) -> Middleware:
    """The middleware that refuses (403, a fixed sentence) a request not addressed to this
    server (``port`` on 127.0.0.1) or made by a web page of another origin."""

    @web.middleware
    async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        headers = request.headers
        refusal = host_refusal(headers.getall("Host", []), port)
        public = request.method in _PUBLIC_METHODS and request.path in _STATIC
        if refusal is None and not public:
            refusal = origin_refusal(
                headers.getall("Origin", []), headers.getall("Sec-Fetch-Site", []), port
            )
        if refusal is None:
            return await handler(request)
        # The header's value is the page's to choose: neither logged nor answered back.
        log.warning(
            "awaken-s3 dev: refused %s %r: %s", request.method, request.path[:120], refusal.code
        )
        return _error(403, refusal.code, refusal.value)

    return guarded


class _Routes:
    def __init__(self, parts: DevParts) -> None:
        self.parts = parts

    def authorized(self, request: web.Request) -> bool:
        token = self.parts.token
        if token is None:
            return True
        given = request.headers.get("Authorization") or ""
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    async def static(self, request: web.Request) -> web.Response:
        name, content_type = _STATIC[request.path]
        data = importlib.resources.files("awaken_s3.dev").joinpath("static", name).read_bytes()
        return web.Response(
            body=data,
            content_type=content_type,
            charset="utf-8",
            headers={"Cache-Control": "no-cache"},
        )

    async def api(self, request: web.Request) -> web.Response:
        # API Gateway matches the route first (an unknown one is its 404), then runs the
        # route's JWT authorizer, whose refusal never reaches the function.
        found = apigw.route_for(request.method, request.path)
        if found is None:
            return _gateway(apigw.gateway_error(404, "Not Found"))
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _gateway(apigw.gateway_error(413, "Request Entity Too Large"))
        if not self.authorized(request):
            return _gateway(apigw.gateway_error(401, "Unauthorized"))
        http = apigw.HttpRequest(
            method=request.method,
            target=request.raw_path,
            headers=tuple(request.headers.items()),
            body=body,
            source_ip=request.remote or "127.0.0.1",
        )
        route, parameters = found
        claims = apigw.jwt_claims(self.parts.sub, issuer=ISSUER, audience=AUDIENCE, now=time.time())
        event = apigw.http_api_event(http, route, parameters, claims=claims)
        return _gateway(apigw.http_response(await self.parts.functions.invoke("api", event)))

    # -- /dev

    async def dev(self, request: web.Request) -> web.Response:
        if not self.authorized(request):
            return _gateway(apigw.gateway_error(401, "Unauthorized"))
        services = request.app[_SERVICES]
        route = (request.method, request.match_info.get("what", ""))
        if route == ("GET", "info"):
            return web.json_response(self.parts.info())
        if route == ("GET", "threads"):
            return web.json_response({"threads": await tables.threads(services, self.parts.sub)})
        if route == ("POST", "sweep"):
            return web.json_response(await self.parts.functions.sweep())
        return _error(404, "not_found", "no such dev endpoint")

    async def dev_run(self, request: web.Request) -> web.Response:
        if not self.authorized(request):
            return _gateway(apigw.gateway_error(401, "Unauthorized"))
        try:
            run_id = validate_public_run_id(request.match_info["run_id"])
        except InvalidIdError as exc:
            return _error(400, "invalid_id", str(exc))
        action = request.match_info.get("action", "")
        internals = await tables.run_internals(request.app[_SERVICES], self.parts.sub, run_id)
        if internals is None:
            return _error(404, "not_found", f"run {run_id} not found")
        stored_run_id = internals["stored_run_id"]
        if (request.method, action) == ("POST", "kill"):
            pids = self.parts.workers.kill(stored_run_id)
            if not pids:
                return _error(409, "no_worker", f"no worker is driving run {run_id} now")
            return web.json_response({"killed": pids})
        if (request.method, action) != ("GET", ""):
            return _error(404, "not_found", "no such dev endpoint")
        timeline = self.parts.timelines.of(stored_run_id)
        internals["workers"] = self.parts.workers.driving(stored_run_id)
        internals["writers"] = timeline.writers
        internals["invocations"] = timeline.invocations
        return web.json_response(internals)


def application(parts: DevParts, port: int) -> web.Application:
    """The dev server's routes, for a server listening on 127.0.0.1:``port``."""
    routes = _Routes(parts)
    app = web.Application(client_max_size=MAX_BODY, middlewares=[guard(port)])

    async def with_services(app: web.Application) -> AsyncIterator[None]:
        async with open_services(StorageSettings.from_env(need_queue=True)) as services:
            app[_SERVICES] = services
            tasks = [asyncio.create_task(start(services)) for start in parts.background]
            yield
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await parts.sockets.close_all()

    app.cleanup_ctx.append(with_services)
    for path in _STATIC:
        app.router.add_get(path, routes.static)
    app.router.add_get("/ws", parts.sockets.serve)
    # The management API, as anyone with the token calls it, and under the path only the
    # processes this stack starts are given (botocore signs its requests; it cannot send
    # the token).
    for prefix in ("", MANAGEMENT_PREFIX):
        path = prefix + "/@connections/{connection_id}"
        app.router.add_post(path, parts.sockets.post)
        app.router.add_delete(path, parts.sockets.delete)
        app.router.add_get(path, parts.sockets.get)
    app.router.add_route("*", "/dev/runs/{run_id}", routes.dev_run)
    app.router.add_route("*", "/dev/runs/{run_id}/{action}", routes.dev_run)
    app.router.add_route("*", "/dev/{what}", routes.dev)
    app.router.add_route("*", "/{tail:.*}", routes.api)
    return app


def listen(port: int) -> socket.socket:
    """A socket bound to 127.0.0.1:``port`` (0: any free port), so the server's address is
    known before the server (and the workers, who post frames to it) start."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


class WebServer:
    """``app`` served on ``sock`` (:func:`listen`) from a thread of its own, until
    :meth:`stop`."""

    def __init__(self, app: web.Application, sock: socket.socket) -> None:
        self.loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self._thread = threading.Thread(target=self.loop.run_forever, name="dev-http", daemon=True)
        self._thread.start()
        try:
            self.port: int = self._call(self._start(sock))
        except BaseException:
            self.stop()
            raise

    def _call(self, coro: Awaitable[Any]) -> Any:
        async def wrapped() -> Any:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result()

    async def _start(self, sock: socket.socket) -> int:
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()
        bound: int = sock.getsockname()[1]
        return bound

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._call(self._runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
