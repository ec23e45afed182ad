"""template.yaml's WebSocket API: the routes the code declares, the connect authorized by a
REQUEST authorizer with the HTTP API's own issuer and audiences, connection records that
expire, every grant scoped to what the socket functions do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from awaken_s3.service.connections import TTL_ATTRIBUTE
from awaken_s3.service.connections import table_definition as connection_table
from awaken_s3.service.routes import (
    SOCKET_AUTHORIZED_ROUTE,
    SOCKET_ROUTE_SELECTION,
    SOCKET_ROUTES,
    SOCKET_TOKEN_PARAMETER,
)
from tests.infra.cfn import resources_of_type
from tests.infra.test_template import _granted

Deployed = Callable[..., dict[str, Any]]
SOCKET_API = "<SocketApi>"


def _routes(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        route["Properties"]["RouteKey"]: route["Properties"]
        for route in resources_of_type(resources, "AWS::ApiGatewayV2::Route").values()
        if route["Properties"]["ApiId"] == SOCKET_API
    }


def test_the_socket_routes_are_the_declared_ones_on_one_integration(deployed: Deployed) -> None:
    resources = deployed()
    api = resources["SocketApi"]["Properties"]
    assert api["ProtocolType"] == "WEBSOCKET"
    assert api["RouteSelectionExpression"] == SOCKET_ROUTE_SELECTION
    routes = _routes(resources)
    assert set(routes) == set(SOCKET_ROUTES)
    assert {route["Target"] for route in routes.values()} == {"integrations/<SocketIntegration>"}
    integration = resources["SocketIntegration"]["Properties"]
    assert integration["IntegrationType"] == "AWS_PROXY"
    assert "<SocketFunction.Arn>" in integration["IntegrationUri"]
    assert resources["SocketFunction"]["Properties"]["Handler"] == "handlers.socket.lambda_handler"


def test_only_connect_is_authorized_and_by_the_http_api_s_issuer(deployed: Deployed) -> None:
    issuer = "https://issuer.example/pool"
    resources = deployed(AuthMode="jwt", JwtIssuer=issuer, JwtAudience="a,b")
    routes = _routes(resources)
    connect = routes.pop(SOCKET_AUTHORIZED_ROUTE)
    assert (connect["AuthorizationType"], connect["AuthorizerId"]) == (
        "CUSTOM",
        "<SocketAuthorizer>",
    )
    # API Gateway runs an authorizer on the handshake only; the rest ride on the connection.
    assert {route["AuthorizationType"] for route in routes.values()} == {"NONE"}
    authorizer = resources["SocketAuthorizer"]["Properties"]
    assert authorizer["AuthorizerType"] == "REQUEST"
    assert authorizer["IdentitySource"] == [f"route.request.querystring.{SOCKET_TOKEN_PARAMETER}"]
    assert "<SocketAuthorizerFunction.Arn>" in authorizer["AuthorizerUri"]
    assert "AuthorizerResultTtlInSeconds" not in authorizer, "a cached Allow outlives the token"
    function = resources["SocketAuthorizerFunction"]["Properties"]
    assert function["Handler"] == "handlers.socket_authorizer.lambda_handler"
    env = function["Environment"]["Variables"]
    jwt = resources["HttpApi"]["Properties"]["Auth"]["Authorizers"]["JwtAuthorizer"]
    assert env["AWAKEN_JWT_ISSUER"] == jwt["JwtConfiguration"]["issuer"] == issuer
    assert env["AWAKEN_JWT_AUDIENCE"] == ",".join(jwt["JwtConfiguration"]["audience"]) == "a,b"


def test_connection_records_expire_and_match_the_code(deployed: Deployed) -> None:
    table = deployed()["ConnectionTable"]["Properties"]
    expected = connection_table()
    assert table["KeySchema"] == expected["KeySchema"]
    assert table["AttributeDefinitions"] == expected["AttributeDefinitions"]
    assert table["BillingMode"] == expected["BillingMode"]
    assert table["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert table["SSESpecification"] == {"SSEEnabled": True}


def test_the_management_endpoint_is_botocore_s_own_setting_for_the_stage(
    deployed: Deployed,
) -> None:
    resources = deployed()
    stage = resources["SocketStage"]["Properties"]
    for name in ("WorkerFunction", "SocketFunction", "ApiFunction"):
        env = resources[name]["Properties"]["Environment"]["Variables"]
        assert env["AWAKEN_CONNECTIONS_TABLE"] == "<ConnectionTable>"
        endpoint = env["AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI"]
        assert (
            endpoint
            == f"https://{SOCKET_API}.execute-api.us-east-1.amazonaws.com/" + stage["StageName"]
        )


def test_the_socket_stage_is_throttled_and_logs_no_token(deployed: Deployed) -> None:
    stage = deployed(ApiThrottlingRateLimit="7", ApiThrottlingBurstLimit="9")["SocketStage"]
    settings = stage["Properties"]["DefaultRouteSettings"]
    assert settings == {"ThrottlingRateLimit": "7", "ThrottlingBurstLimit": "9"}
    log_format = stage["Properties"]["AccessLogSettings"]["Format"]
    assert "querystring" not in log_format.lower() and "token" not in log_format.lower()


def test_the_socket_functions_hold_only_what_they_use(deployed: Deployed) -> None:
    resources = deployed()
    grants = _granted(resources, "SocketRole")
    connections, threads = {"<ConnectionTable.Arn>"}, {"<ThreadTable.Arn>"}
    assert grants["dynamodb:PutItem"] == grants["dynamodb:DeleteItem"] == connections
    for action in ("GetItem", "Query", "UpdateItem"):
        assert grants[f"dynamodb:{action}"] == connections | threads
    assert grants["s3:GetObject"] == {
        "<CheckpointBucket.Arn>/checkpoints/*",
        "<CheckpointBucket.Arn>/messages/*",
    }
    # A cancel puts the run's checkpoint again with its mark (conditionally: the bucket
    # policy admits nothing else); it never deletes one.
    assert grants["s3:PutObject"] == {"<CheckpointBucket.Arn>/checkpoints/*"}
    assert not {"s3:DeleteObject", "sqs:SendMessage"} & set(grants)
    assert grants["execute-api:ManageConnections"] == {
        f"arn:aws:execute-api:us-east-1:123456789012:{SOCKET_API}/live/POST/@connections/*"
    }
    # The authorizer only checks a token against the issuer's published keys.
    authorizer = _granted(resources, "SocketAuthorizerRole")
    assert set(authorizer) == {"logs:CreateLogStream", "logs:PutLogEvents"}
    permission = resources["SocketAuthorizerPermission"]["Properties"]
    assert permission["SourceArn"].endswith(f"{SOCKET_API}/authorizers/<SocketAuthorizer>")
    invoke = resources["SocketInvokePermission"]["Properties"]
    assert invoke["SourceArn"].endswith(f"{SOCKET_API}/*")
