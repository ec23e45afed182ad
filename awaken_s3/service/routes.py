"""The API's routes, declared once: the HTTP API's and the WebSocket API's.

The resolver registers its route functions from :data:`HTTP_ROUTES` (``awaken_s3.service.http``),
the dev server routes requests with them (``awaken_s3.dev.apigw``), and the template checks
(``tests/infra``) compare them with template.yaml's events and socket routes, so the three can
never list different routes.

Paths are written as API Gateway writes them (``/runs/{run_id}``); :meth:`HttpRoute.resolver_path`
is the same path in Powertools' resolver syntax (``/runs/<run_id>``).
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class HttpRoute:
    #: the route function's name in ``awaken_s3.service.http`` (and the template event's)
    name: str
    method: str
    path: str

    @property
    def key(self) -> str:
        """API Gateway's ``routeKey``."""
        return f"{self.method} {self.path}"

    @property
    def resolver_path(self) -> str:
        return re.sub(r"\{(\w+)\}", r"<\1>", self.path)

    def match(self, method: str, path: str) -> dict[str, str] | None:
        """The path parameters when ``method`` and ``path`` are this route's, else None."""
        if method != self.method:
            return None
        pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path))
        found = re.fullmatch(pattern, path)
        if found is None:
            return None
        return {name: urllib.parse.unquote(value) for name, value in found.groupdict().items()}


#: the HTTP API (JWT authorizer on every route); ``name`` is also the template's event name
HTTP_ROUTES: Final = (
    HttpRoute("ListAgents", "GET", "/agents"),
    HttpRoute("CreateThread", "POST", "/threads"),
    HttpRoute("GetThread", "GET", "/threads/{thread_id}"),
    HttpRoute("CreateRun", "POST", "/threads/{thread_id}/runs"),
    HttpRoute("GetRun", "GET", "/runs/{run_id}"),
    HttpRoute("GetRunPartial", "GET", "/runs/{run_id}/partial"),
    HttpRoute("CancelRun", "POST", "/runs/{run_id}/cancel"),
)


def route_for(method: str, path: str) -> tuple[HttpRoute, dict[str, str]] | None:
    """The route API Gateway would pick for a request, and its path parameters."""
    for route in HTTP_ROUTES:
        parameters = route.match(method, path)
        if parameters is not None:
            return route, parameters
    return None


#: the WebSocket API's route selection: a message's ``action`` names its route
SOCKET_ROUTE_SELECTION: Final = "$request.body.action"
#: the WebSocket API's routes (every one served by ``awaken_s3.service.socket``); only
#: ``$connect`` is authorized (API Gateway runs an authorizer on the connect request alone)
SOCKET_ROUTES: Final = ("$connect", "$disconnect", "follow", "cancel", "$default")
SOCKET_AUTHORIZED_ROUTE: Final = "$connect"
#: the query parameter that carries the caller's JWT on connect (browsers cannot set headers
#: on a WebSocket handshake); the authorizer's identity source
SOCKET_TOKEN_PARAMETER: Final = "token"


def socket_route_key(body: str) -> str:
    """The route API Gateway selects for a message: its ``action`` when a route has that name,
    else ``$default`` (a body that is not a JSON object included)."""
    import json

    try:
        action = json.loads(body).get("action")
    except (ValueError, AttributeError):
        return "$default"
    if isinstance(action, str) and action in SOCKET_ROUTES and not action.startswith("$"):
        return action
    return "$default"
