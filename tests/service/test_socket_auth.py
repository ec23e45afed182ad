"""The WebSocket API's connect authorizer against a real issuer's endpoints: an OpenID
discovery document and a JWKS served on 127.0.0.1, tokens signed with the issuer's RSA key.
Only a current token of that issuer for one of the audiences connects; the allowed
principal is its ``sub``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from awaken_s3.service import socket_auth
from awaken_s3.service.socket_auth import Unauthorized, authorize

ARN = "arn:aws:execute-api:us-east-1:123456789012:abc123/live/$connect"


class Issuer:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = {"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        self.url = ""

    def token(self, *, key: Any = None, kid: str = "k1", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "sub": "alice", "aud": "app", "exp": now + 300, "iat": now}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    found = Issuer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            body: dict[str, Any]
            if self.path == "/.well-known/openid-configuration":
                body = {"issuer": found.url, "jwks_uri": found.url + "/jwks.json"}
            elif self.path == "/jwks.json":
                body = found.jwks
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    socket_auth.jwks_client.cache_clear()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        socket_auth.jwks_client.cache_clear()


def connect(issuer: Issuer, token: str | None, audience: str = "app,other") -> dict[str, Any]:
    event: dict[str, Any] = {"type": "REQUEST", "methodArn": ARN}
    if token is not None:
        event["queryStringParameters"] = {"token": token}
    env = {"AWAKEN_JWT_ISSUER": issuer.url, "AWAKEN_JWT_AUDIENCE": audience}
    return authorize(event, env)


def test_a_current_token_of_the_issuer_connects_as_its_sub(issuer: Issuer) -> None:
    allowed = connect(issuer, issuer.token())
    assert allowed["principalId"] == "alice" and allowed["context"] == {"sub": "alice"}
    (statement,) = allowed["policyDocument"]["Statement"]
    assert statement == {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": ARN}
    # An access token names its client in client_id instead of aud (Cognito's do).
    assert connect(issuer, issuer.token(aud=None, client_id="other"))["principalId"] == "alice"
    assert connect(issuer, issuer.token(aud=["x", "app"]))["principalId"] == "alice"


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "someone-else"},
        {"aud": None},
        {"iss": "https://impostor.example"},
        {"exp": int(time.time()) - 120},
        {"sub": None},
    ],
    ids=["audience", "no-audience", "issuer", "expired", "no-sub"],
)
def test_any_other_token_is_refused(issuer: Issuer, claims: dict[str, Any]) -> None:
    with pytest.raises(Unauthorized, match=r"^Unauthorized$"):
        connect(issuer, issuer.token(**claims))


def test_a_forged_or_missing_token_is_refused(issuer: Issuer) -> None:
    for token in (issuer.token(key=issuer.other), issuer.token(kid="nope"), "not.a.jwt", None):
        with pytest.raises(Unauthorized):
            connect(issuer, token)
    unsigned = jwt.encode({"iss": issuer.url, "sub": "a", "aud": "app"}, "", algorithm="none")
    with pytest.raises(Unauthorized):
        connect(issuer, unsigned)


def test_without_its_settings_it_refuses_everyone(issuer: Issuer) -> None:
    with pytest.raises(Unauthorized):
        authorize({"methodArn": ARN, "queryStringParameters": {"token": issuer.token()}}, {})
