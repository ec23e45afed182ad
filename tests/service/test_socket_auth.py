"""The WebSocket API's connect authorizer against a real issuer's endpoints: an OpenID
discovery document and a JWKS served on 127.0.0.1, tokens signed with the issuer's RSA key.
Only a current token of that issuer for one of the audiences connects; the allowed
principal is its ``sub``."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec as ec_mod
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

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


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(header: Any, claims: dict[str, Any] | None = None, signature: bytes = b"sig") -> str:
    """A token with exactly this header (any JSON, or raw bytes) and an arbitrary signature."""
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    body = json.dumps(claims or {"sub": "alice", "aud": "app"}).encode()
    return f"{_b64(head)}.{_b64(body)}.{_b64(signature)}"


def _tokens_that_do_not_fit(issuer: Issuer) -> dict[str, str]:
    ec = ec_mod.generate_private_key(ec_mod.SECP256R1())
    now = int(time.time())
    claims = {"iss": issuer.url, "sub": "alice", "aud": "app", "exp": now + 300}
    return {
        "hs256-against-rsa": jwt.encode(claims, "s" * 32, algorithm="HS256", headers={"kid": "k1"}),
        "es256-against-rsa": jwt.encode(claims, ec, algorithm="ES256", headers={"kid": "k1"}),
        "ps256-header-rs-key": forged({"alg": "PS256", "kid": "k1", "typ": "JWT"}, claims),
        "es256-forged-header": forged({"alg": "ES256", "kid": "k1"}, claims),
        "eddsa-key": forged({"alg": "EdDSA", "kid": "ed"}, claims),
        "ec-key-rs256-header": forged({"alg": "RS256", "kid": "ec"}, claims),
        "unknown-alg": forged({"alg": "XY999", "kid": "k1"}, claims),
        "alg-not-a-string": forged({"alg": 7, "kid": "k1"}, claims),
        "alg-none-with-kid": forged({"alg": "none", "kid": "k1"}, claims, b""),
        "kid-object": forged({"alg": "RS256", "kid": {"x": 1}}, claims),
        "kid-number": forged({"alg": "RS256", "kid": 12}, claims),
        "kid-huge": forged({"alg": "RS256", "kid": "k" * 100_000}, claims),
        "header-a-list": forged(["RS256"], claims),
        "header-not-json": forged(b"\xff\xfe{", claims),
        "header-not-base64": "%%%." + _b64(b"{}") + ".sig",
        "too-many-parts": issuer.token() + ".x",
        "empty-parts": "..",
        "payload-a-list": forged({"alg": "RS256", "kid": "k1"}, None).split(".")[0]
        + "."
        + _b64(b"[1, 2]")
        + ".sig",
    }


def test_a_token_whose_header_does_not_fit_the_key_is_refused_never_raised(
    issuer: Issuer,
) -> None:
    """An HS256, ES256 or PS256 header against the RSA key, an EdDSA or EC key in the set,
    an unknown or garbled alg, kid or header: each a 401, never another exception (a 500)."""
    ec_public = ec_mod.generate_private_key(ec_mod.SECP256R1()).public_key()
    ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_public))
    ed_public = ed25519.Ed25519PrivateKey.generate().public_key()
    ed_jwk = json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(ed_public))
    issuer.jwks["keys"] += [{**ec_jwk, "kid": "ec"}, {**ed_jwk, "kid": "ed"}]
    for name, token in _tokens_that_do_not_fit(issuer).items():
        try:
            connect(issuer, token)
        except Unauthorized:
            continue
        except Exception as exc:  # the defect: anything but Unauthorized is a 500
            pytest.fail(f"{name}: {type(exc).__name__}")
        pytest.fail(f"{name}: allowed")
    # The issuer's own token still connects beside those keys.
    assert connect(issuer, issuer.token())["principalId"] == "alice"


@pytest.mark.parametrize(
    "claims",
    [{"aud": 7}, {"aud": [["app"]]}, {"aud": [{"a": 1}]}, {"sub": 7}, {"sub": ""}],
    ids=["aud-number", "aud-nested-list", "aud-objects", "sub-number", "sub-empty"],
)
def test_claims_of_the_wrong_type_are_refused(issuer: Issuer, claims: dict[str, Any]) -> None:
    with pytest.raises(Unauthorized):
        connect(issuer, issuer.token(**claims))


def test_a_malformed_connect_request_is_refused(issuer: Issuer) -> None:
    for event in (
        {"methodArn": ARN, "queryStringParameters": ["token"]},
        {"methodArn": 5, "queryStringParameters": {"token": issuer.token()}},
        {"methodArn": ARN, "queryStringParameters": {"token": 5}},
    ):
        with pytest.raises(Unauthorized):
            authorize(event, {"AWAKEN_JWT_ISSUER": issuer.url, "AWAKEN_JWT_AUDIENCE": "app"})
