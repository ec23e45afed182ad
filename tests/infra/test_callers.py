"""Who may call the stack, per AuthMode: by default (cognito) the stack creates its own user
pool and app client and both APIs' authorizers trust exactly them, so a first deploy needs no
identity provider; with AuthMode=jwt both trust the issuer and audiences given as parameters
and no pool exists. Either way the HTTP API and the WebSocket API accept the same tokens."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from awaken_s3.service import socket_auth
from tests.infra.cfn import Resolver
from tests.infra.conftest import BRING_YOUR_OWN_ISSUER

Deployed = Callable[..., dict[str, Any]]
POOL_ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/<UserPool>"
COGNITO = ("UserPool", "UserPoolClient")


def _authorizers(resources: dict[str, Any]) -> tuple[tuple[str, list[str]], tuple[str, str]]:
    """(issuer, audiences) of the HTTP API's JWT authorizer and of the WebSocket authorizer."""
    auth = resources["HttpApi"]["Properties"]["Auth"]
    http = auth["Authorizers"][auth["DefaultAuthorizer"]]["JwtConfiguration"]
    env = resources["SocketAuthorizerFunction"]["Properties"]["Environment"]["Variables"]
    socket = (env["AWAKEN_JWT_ISSUER"], env["AWAKEN_JWT_AUDIENCE"])
    return (http["issuer"], http["audience"]), socket


def _failed_rules(template: dict[str, Any], **parameters: str) -> set[str]:
    """The template's Rules these parameter values break (CloudFormation refuses the deploy)."""
    resolver = Resolver(template, **parameters)
    failed: set[str] = set()
    for name, rule in template["Rules"].items():
        if "RuleCondition" in rule and not resolver.resolve(rule["RuleCondition"]):
            continue
        if not all(resolver.resolve(a["Assert"]) for a in rule["Assertions"]):
            failed.add(name)
    return failed


# ------------------------------------------------------------------ AuthMode=cognito


def test_the_default_creates_a_user_pool_and_both_authorizers_trust_it(
    template: dict[str, Any], deployed: Deployed
) -> None:
    assert template["Parameters"]["AuthMode"]["Default"] == "cognito"
    # Every parameter has a default: `sam deploy --guided` can take them all.
    assert not [name for name, spec in template["Parameters"].items() if "Default" not in spec]
    resources = deployed()
    assert set(COGNITO) <= set(resources)
    client = resources["UserPoolClient"]["Properties"]
    assert client["UserPoolId"] == "<UserPool>"
    (http_issuer, http_audiences), (socket_issuer, socket_audiences) = _authorizers(resources)
    # Cognito's issuer (the iss of its tokens, where its discovery document and keys are).
    assert http_issuer == socket_issuer == POOL_ISSUER
    # The ID token's aud and the access token's client_id: the app client's id.
    assert http_audiences == ["<UserPoolClient>"]
    assert socket_audiences == "<UserPoolClient>"


def test_the_app_client_is_public_and_signs_in_from_a_shell(deployed: Deployed) -> None:
    client = deployed()["UserPoolClient"]["Properties"]
    # A CLI or browser cannot keep a secret; with one, every sign-in would need a SECRET_HASH.
    assert client["GenerateSecret"] is False
    assert set(client["ExplicitAuthFlows"]) == {
        "ALLOW_USER_PASSWORD_AUTH",  # aws cognito-idp initiate-auth
        "ALLOW_USER_SRP_AUTH",  # the Amplify / Cognito SDKs
        "ALLOW_REFRESH_TOKEN_AUTH",
    }
    # No OAuth flows (client credentials, implicit): only the pool's own users get tokens.
    assert not {"AllowedOAuthFlows", "AllowedOAuthFlowsUserPoolClient"} & set(client)
    assert client["SupportedIdentityProviders"] == ["COGNITO"]
    assert client["PreventUserExistenceErrors"] == "ENABLED"
    assert client["EnableTokenRevocation"] is True
    units = client["TokenValidityUnits"]
    assert (client["IdTokenValidity"], units["IdToken"]) == (60, "minutes")
    assert (client["AccessTokenValidity"], units["AccessToken"]) == (60, "minutes")


def test_only_an_administrator_creates_users_with_strong_passwords(deployed: Deployed) -> None:
    pool = deployed()["UserPool"]["Properties"]
    # The client is public: self sign-up would let anyone run agents on this account's bill.
    assert pool["AdminCreateUserConfig"] == {"AllowAdminCreateUserOnly": True}
    policy = pool["Policies"]["PasswordPolicy"]
    assert policy["MinimumLength"] >= 12
    for rule in ("RequireLowercase", "RequireUppercase", "RequireNumbers", "RequireSymbols"):
        assert policy[rule] is True
    assert policy["TemporaryPasswordValidityDays"] <= 7
    # Nothing verified to recover an account with: only an administrator resets a password.
    assert pool["AccountRecoverySetting"] == {
        "RecoveryMechanisms": [{"Name": "admin_only", "Priority": 1}]
    }
    assert pool["MfaConfiguration"] == "OPTIONAL"
    assert pool["EnabledMfas"] == ["SOFTWARE_TOKEN_MFA"]


def test_the_user_pool_is_kept_like_the_threads_its_users_own(
    template: dict[str, Any], deployed: Deployed
) -> None:
    raw = template["Resources"]["UserPool"]
    # A new pool gives every user a new sub, and the threads are owned by subs.
    assert raw["DeletionPolicy"] == "Retain" and raw["UpdateReplacePolicy"] == "Retain"
    assert deployed()["UserPool"]["Properties"]["DeletionProtection"] == "ACTIVE"
    unprotected = deployed(TableDeletionProtection="false")["UserPool"]["Properties"]
    assert unprotected["DeletionProtection"] == "INACTIVE"


def test_the_pool_s_outputs_are_what_a_first_caller_needs(template: dict[str, Any]) -> None:
    outputs = Resolver(template).section("Outputs")
    assert outputs["Issuer"]["Value"] == POOL_ISSUER
    assert outputs["UserPoolId"]["Value"] == "<UserPool>"
    assert outputs["UserPoolClientId"]["Value"] == "<UserPoolClient>"
    assert {"ApiUrl", "SocketUrl"} <= set(outputs)


# ------------------------------------------------------------------ AuthMode=jwt


def test_bring_your_own_issuer_creates_no_pool_and_uses_the_parameters(
    template: dict[str, Any], deployed: Deployed
) -> None:
    # Resolving refuses any reference to a resource the values do not create, so this also
    # shows that nothing in the jwt deployment points at the absent pool.
    resources = deployed(**{**BRING_YOUR_OWN_ISSUER, "JwtAudience": "a,b"})
    assert not set(COGNITO) & set(resources)
    assert not [r for r in resources.values() if r["Type"].startswith("AWS::Cognito::")]
    (http_issuer, http_audiences), (socket_issuer, socket_audiences) = _authorizers(resources)
    assert http_issuer == socket_issuer == BRING_YOUR_OWN_ISSUER["JwtIssuer"]
    assert http_audiences == ["a", "b"] and socket_audiences == "a,b"
    outputs = Resolver(template, **BRING_YOUR_OWN_ISSUER).section("Outputs")
    assert outputs["Issuer"]["Value"] == BRING_YOUR_OWN_ISSUER["JwtIssuer"]
    assert not {"UserPoolId", "UserPoolClientId"} & set(outputs)
    assert {"ApiUrl", "SocketUrl"} <= set(outputs)


def test_the_resolver_refuses_a_reference_to_an_absent_resource(template: dict[str, Any]) -> None:
    # What the test above relies on: a jwt deployment that pointed at the pool would raise.
    resolver = Resolver(template, **BRING_YOUR_OWN_ISSUER)
    with pytest.raises(KeyError, match="UserPool"):
        resolver.resolve({"Ref": "UserPoolClient"})
    with pytest.raises(KeyError, match="UserPool"):
        resolver.resolve({"Fn::Sub": "https://x/${UserPool}"})
    assert Resolver(template).resolve({"Ref": "UserPool"}) == "<UserPool>"


@pytest.mark.parametrize(
    ("parameters", "failed"),
    [
        ({}, set()),
        (BRING_YOUR_OWN_ISSUER, set()),
        ({"AuthMode": "jwt"}, {"JwtModeNeedsIssuer"}),
        ({"AuthMode": "jwt", "JwtIssuer": "https://i.example"}, {"JwtModeNeedsIssuer"}),
        ({"AuthMode": "jwt", "JwtAudience": "a"}, {"JwtModeNeedsIssuer"}),
        # An upgrade whose samconfig.toml still names its own issuer is refused, not moved
        # to a new and empty user pool.
        ({"JwtIssuer": "https://i.example", "JwtAudience": "a"}, {"CognitoModeTakesNoIssuer"}),
        ({"JwtAudience": "a"}, {"CognitoModeTakesNoIssuer"}),
        ({"JwtAudience": "a,"}, {"CognitoModeTakesNoIssuer"}),
        ({**BRING_YOUR_OWN_ISSUER, "JwtAudience": "a,"}, {"JwtModeNeedsIssuer"}),
    ],
    ids=[
        "cognito",
        "jwt",
        "jwt-nothing",
        "jwt-no-audience",
        "jwt-no-issuer",
        "upgrade",
        "audience",
        "audience-and-empty",
        "jwt-empty-audience-entry",
    ],
)
def test_the_rules_refuse_a_half_configured_issuer(
    template: dict[str, Any], parameters: dict[str, str], failed: set[str]
) -> None:
    assert _failed_rules(template, **parameters) == failed


# ------------------------------------------------------------------ Cognito's tokens


class _Keys:
    """A JWKS on 127.0.0.1 holding one RSA key, as Cognito publishes its pool's keys."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = {"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        self.url = ""

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "k1"})


@pytest.fixture
def pool_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Keys]:
    keys = _Keys()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            data = json.dumps(keys.jwks).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    keys.url = f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    # The pool's discovery document is on the internet: its keys come from here instead.
    # Everything after the key lookup (issuer, expiry, audience, subject) is the real check.
    monkeypatch.setattr(socket_auth, "jwks_client", lambda issuer: jwt.PyJWKClient(keys.url))
    try:
        yield keys
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_cognito_s_id_and_access_tokens_connect_with_the_deployed_settings(
    deployed: Deployed, pool_keys: _Keys
) -> None:
    env = deployed()["SocketAuthorizerFunction"]["Properties"]["Environment"]["Variables"]
    issuer, client_id = env["AWAKEN_JWT_ISSUER"], env["AWAKEN_JWT_AUDIENCE"]
    now = int(time.time())
    common = {"sub": "5f1c-alice", "iss": issuer, "exp": now + 3600, "iat": now}
    # The claims Cognito puts in each token: the ID token names the app client in aud, the
    # access token in client_id (it has no aud).
    id_token = {**common, "aud": client_id, "token_use": "id", "cognito:username": "alice"}
    access_token = {**common, "client_id": client_id, "token_use": "access", "scope": "aws"}
    arn = "arn:aws:execute-api:us-east-1:123456789012:abc/live/$connect"
    for claims in (id_token, access_token):
        event = {"methodArn": arn, "queryStringParameters": {"token": pool_keys.sign(claims)}}
        allowed = socket_auth.authorize(event, env)
        assert allowed["principalId"] == "5f1c-alice"
    # Another app client of the same pool, or a token of another pool, is refused.
    for claims in ({**id_token, "aud": "other-client"}, {**id_token, "iss": issuer + "x"}):
        event = {"methodArn": arn, "queryStringParameters": {"token": pool_keys.sign(claims)}}
        with pytest.raises(socket_auth.Unauthorized):
            socket_auth.authorize(event, env)
