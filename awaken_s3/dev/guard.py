"""Who may talk to ``awaken-s3 dev``: its own origin, and clients that are not web pages.

The server listens on 127.0.0.1, but every web page the developer opens runs in a browser on
this machine too. Two things keep such pages out (pure decisions here; the middleware in
:mod:`awaken_s3.dev.web` applies them):

* ``Host`` must name this server (``127.0.0.1:PORT`` or ``localhost:PORT``), on every request
  and the WebSocket handshake. A page on a name its author controls, re-resolved to
  127.0.0.1 (DNS rebinding), is same-origin with itself and could read every answer; its
  browser still sends that name as ``Host``, which is refused.
* A request from a page elsewhere is refused: a present ``Origin`` that is not this
  server's (``null`` included), or ``Sec-Fetch-Site`` saying the request came from another
  site. A cross-site ``text/plain`` POST needs no CORS preflight, so without this a page
  could start runs (spending the developer's provider key), sweep or kill workers. Clients
  that are not browsers send neither header and pass (curl, the CLI, botocore, tests); with
  ``--require-token`` they need the token as well (:mod:`awaken_s3.dev.web`).

The console's three files are exempt from the second check only: a link from another site to
``http://127.0.0.1:PORT/`` is a navigation the browser marks cross-site, and the page it
loads is the package's own static file.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

#: the names this server answers to; it listens on IPv4 loopback only, so not ``[::1]``
LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost")
#: what ``Sec-Fetch-Site`` says of a request this server's own page or its user made
_OWN_FETCH_SITES: Final = frozenset({"same-origin", "none"})


class Refusal(Enum):
    """Why a request was refused; the value is the fixed sentence the caller gets."""

    HOST = "this dev server answers only requests addressed to it as 127.0.0.1 or localhost"
    ORIGIN = "this dev server refuses requests from a web page of another origin"

    @property
    def code(self) -> str:
        return "forbidden_host" if self is Refusal.HOST else "forbidden_origin"


def own_hosts(port: int) -> frozenset[str]:
    """The ``Host`` values that name this server (a browser leaves out port 80)."""
    hosts = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    if port == 80:
        hosts.update(LOOPBACK_NAMES)
    return frozenset(hosts)


def own_origins(port: int) -> frozenset[str]:
    return frozenset(f"http://{host}" for host in own_hosts(port))


def host_refusal(hosts: list[str], port: int) -> Refusal | None:
    """``hosts``: every ``Host`` header the request carries (exactly one is allowed)."""
    if len(hosts) != 1 or hosts[0].strip().lower() not in own_hosts(port):
        return Refusal.HOST
    return None


def origin_refusal(origins: list[str], fetch_sites: list[str], port: int) -> Refusal | None:
    """A request from a page elsewhere (``origins``, ``fetch_sites``: every ``Origin`` and
    ``Sec-Fetch-Site`` header it carries); one with neither header is a client that is not a
    browser, and passes."""
    if any(origin.strip().lower() not in own_origins(port) for origin in origins):
        return Refusal.ORIGIN
    if any(site.strip().lower() not in _OWN_FETCH_SITES for site in fetch_sites):
        return Refusal.ORIGIN
    return None
