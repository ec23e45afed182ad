"""The WebSocket API's REQUEST authorizer: the caller's JWT, checked as the HTTP API's JWT
authorizer checks it (same issuer, same audiences).

API Gateway's WebSocket APIs have no JWT authorizer, and a browser cannot set headers on a
WebSocket handshake, so the token comes as the ``token`` query parameter of the connect
request (the authorizer's identity source: without it API Gateway refuses the handshake
with 401 before invoking this). The token's signature is checked against the issuer's keys:
the JWKS its OpenID discovery document names (``<issuer>/.well-known/openid-configuration``,
as the HTTP API's authorizer finds them), fetched and cached by PyJWT's ``PyJWKClient``. Then
``iss`` must be the issuer, ``exp`` in the future, and ``aud`` (or, for access tokens that
carry none, ``client_id``) one of the audiences. The allowed principal is the token's
``sub``; the context passes it to every route of the connection. Any refusal raises
``Unauthorized`` (API Gateway's 401); the token is never logged.

Settings: ``AWAKEN_JWT_ISSUER`` and ``AWAKEN_JWT_AUDIENCE`` (comma-separated): the issuer and
audiences template.yaml gives both authorizers (the stack's user pool and app client with
``AuthMode=cognito``, ``JwtIssuer`` and ``JwtAudience`` with ``AuthMode=jwt``).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, Final

import jwt

from awaken_s3.errors import AwakenError
from awaken_s3.service.routes import SOCKET_TOKEN_PARAMETER

log = logging.getLogger("awaken_s3.socket_auth")

#: what an issuer may sign with (never "none", never an HMAC a public key would verify)
ALGORITHMS: Final = ("RS256", "RS384", "RS512", "ES256", "ES384", "PS256")
#: seconds of clock skew tolerated on exp / nbf / iat
LEEWAY: Final = 30
_DISCOVERY_TIMEOUT: Final = 5


class Unauthorized(AwakenError):
    """The connect request is refused (API Gateway answers 401)."""

    def __init__(self) -> None:
        # API Gateway reads exactly this message as "refuse with 401".
        super().__init__("Unauthorized")


@functools.cache
def jwks_client(issuer: str) -> jwt.PyJWKClient:
    """The issuer's keys, from its discovery document; cached for the container's life
    (PyJWKClient refreshes its key set when a token names a key it does not have)."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    with urllib.request.urlopen(url, timeout=_DISCOVERY_TIMEOUT) as answer:
        jwks_uri = json.loads(answer.read())["jwks_uri"]
    return jwt.PyJWKClient(jwks_uri, cache_keys=True, timeout=_DISCOVERY_TIMEOUT)


def _signed_claims(token: str, *, issuer: str) -> dict[str, Any]:
    """The claims of a token the issuer's key signed, or :class:`Unauthorized`.

    Anything the token can make PyJWT or the crypto library raise is a refusal: a header
    whose ``alg`` does not fit the key (an HMAC or EC header against an RSA key surfaces as
    the library's own ``TypeError`` or ``ValueError``), a key type PyJWT has no algorithm for,
    a garbled header or ``kid``. Nothing a caller sends is allowed by an error."""
    try:
        key = jwks_client(issuer).get_signing_key_from_jwt(token)
        claims: Any = jwt.decode(
            token,
            key.key,
            algorithms=list(ALGORITHMS),
            issuer=issuer,
            leeway=LEEWAY,
            options={"require": ["exp", "iss", "sub"], "verify_aud": False},
        )
    except Exception as exc:  # refuse, never a 500: see above
        log.info("connect refused: %s", type(exc).__name__)
        raise Unauthorized() from exc
    if not isinstance(claims, dict):
        raise Unauthorized()
    return claims


def _audiences(claims: Mapping[str, Any]) -> set[str]:
    """The audiences a token names: ``aud`` (a string or a list), else ``client_id``; only
    strings count."""
    aud = claims.get("aud")
    given = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if not given and claims.get("client_id") is not None:
        given = [claims["client_id"]]
    return {a for a in given if isinstance(a, str)}


def verify(token: str, *, issuer: str, audiences: Sequence[str]) -> dict[str, Any]:
    """The token's claims when it is the issuer's, for one of ``audiences``, and current."""
    claims = _signed_claims(token, issuer=issuer)
    sub = claims.get("sub")
    if not _audiences(claims) & set(audiences) or not isinstance(sub, str) or not sub:
        log.info("connect refused: audience or subject")
        raise Unauthorized()
    return claims


def policy(sub: str, method_arn: str) -> dict[str, Any]:
    """Allow this connect request (the method ARN ends in ``$connect``) for ``sub``."""
    return {
        "principalId": sub,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": method_arn}
            ],
        },
        "context": {"sub": sub},
    }


def authorize(event: Mapping[str, Any], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The policy allowing the connect, or :class:`Unauthorized` (API Gateway's 401) for
    anything else, whatever the request holds: never another exception (a 500)."""
    try:
        return _authorize(event, os.environ if env is None else env)
    except Unauthorized:
        raise
    except Exception as exc:
        log.warning("connect refused: %s", type(exc).__name__)
        raise Unauthorized() from exc


def _authorize(event: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    issuer = env.get("AWAKEN_JWT_ISSUER") or ""
    audiences = [a.strip() for a in (env.get("AWAKEN_JWT_AUDIENCE") or "").split(",") if a.strip()]
    if not issuer or not audiences:
        log.error("AWAKEN_JWT_ISSUER and AWAKEN_JWT_AUDIENCE must be set: refusing every connect")
        raise Unauthorized()
    query = event.get("queryStringParameters") or {}
    token = query.get(SOCKET_TOKEN_PARAMETER) if isinstance(query, Mapping) else None
    method_arn = event.get("methodArn")
    if not isinstance(token, str) or not token or not isinstance(method_arn, str):
        raise Unauthorized()
    claims = verify(token, issuer=issuer, audiences=audiences)
    return policy(str(claims["sub"]), method_arn)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return authorize(event)
