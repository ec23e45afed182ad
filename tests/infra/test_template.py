"""What template.yaml promises a user who deploys it: private encrypted storage, TLS only,
least-privilege roles, every route behind the JWT authorizer, a FIFO queue that cannot lose or
loop a run, and exactly the handler paths and environment the code reads."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from awaken_s3.service.config import SweeperSettings
from awaken_s3.service.liveness import Path, Timing
from awaken_s3.settings import StorageSettings
from awaken_s3.threads.expressions import table_definition
from tests.infra.cfn import Resolver, as_list, resources_of_type, role_statements
from tests.infra.conftest import BRING_YOUR_OWN_ISSUER

Deployed = Callable[..., dict[str, Any]]

CONTRACT_ENV = {
    "AWAKEN_BUCKET",
    "AWAKEN_TABLE",
    "AWAKEN_QUEUE_URL",
    "AWAKEN_CONNECTIONS_TABLE",
    # botocore's own endpoint setting for the management API (never a home-made one)
    "AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI",
    "AWAKEN_CHECKPOINT_PREFIX",
    "AWAKEN_PROVIDER",
    "AWAKEN_MODEL",
    "AWAKEN_OPENAI_BASE_URL",
    "AWAKEN_API_KEY_PARAM",
    "AWAKEN_API_KEY_SECRET",
    "AWAKEN_DEADLINE_MARGIN_SECONDS",
    "AWAKEN_TURN_HEADROOM_SECONDS",
    "AWAKEN_LEASE_SECONDS",
    "AWAKEN_VISIBILITY_MARGIN_SECONDS",
    "AWAKEN_MAX_IDLE_SUSPENSIONS",
    "AWAKEN_MAX_INTERRUPTIONS",
    "POWERTOOLS_SERVICE_NAME",
    "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_LOG_LEVEL",
}
# Parameter sets covering every optional branch of the roles.
VARIANTS: list[dict[str, str]] = [
    {},
    {"Provider": "bedrock", "Model": "anthropic.claude-3-5-sonnet-20240620-v1:0"},
    {
        "Provider": "bedrock",
        "Model": "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc",
    },
    {"Provider": "anthropic", "Model": "claude-sonnet-4-5", "ApiKeyParameterName": "/awaken/k"},
    {"Provider": "openai", "Model": "gpt-4.1", "ApiKeySecret": "awaken/openai"},
    {
        "Provider": "openai",
        "Model": "gpt-4.1",
        "ApiKeySecret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:k-AbCdEf",
        "ApiKeyKmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/1",
        "BucketKmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/2",
    },
]


def _bucket(resources: dict[str, Any]) -> dict[str, Any]:
    (bucket,) = resources_of_type(resources, "AWS::S3::Bucket").values()
    props: dict[str, Any] = bucket["Properties"]
    return props


def _statements(resources: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return list(role_statements(resources[role]))


def _granted(resources: dict[str, Any], role: str) -> dict[str, set[str]]:
    """Allowed action -> the resources it is granted on."""
    grants: dict[str, set[str]] = {}
    for statement in _statements(resources, role):
        if statement["Effect"] != "Allow":
            continue
        for action in as_list(statement["Action"]):
            grants.setdefault(action, set()).update(as_list(statement["Resource"]))
    return grants


# ------------------------------------------------------------------ bucket


def test_bucket_is_private_encrypted_and_owner_enforced(deployed: Deployed) -> None:
    for variant in ({}, {"BucketKmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/k"}):
        bucket = _bucket(deployed(**variant))
        block = bucket["PublicAccessBlockConfiguration"]
        assert block == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert bucket["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
        (rule,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        default = rule["ServerSideEncryptionByDefault"]
        if variant:
            assert default == {
                "SSEAlgorithm": "aws:kms",
                "KMSMasterKeyID": variant["BucketKmsKeyArn"],
            }
        else:
            assert default == {"SSEAlgorithm": "AES256"}
        # Versioning would keep every partial checkpoint forever.
        assert "VersioningConfiguration" not in bucket


def test_bucket_policy_denies_every_request_without_tls(deployed: Deployed) -> None:
    resources = deployed()
    (policy,) = resources_of_type(resources, "AWS::S3::BucketPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    tls = [
        s
        for s in statements
        if s["Effect"] == "Deny"
        and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
    ]
    assert len(tls) == 1
    assert tls[0]["Principal"] == "*" and tls[0]["Action"] == "s3:*"
    assert set(tls[0]["Resource"]) == {"<CheckpointBucket.Arn>", "<CheckpointBucket.Arn>/*"}
    assert not [s for s in statements if s["Effect"] == "Allow"]


def test_bucket_refuses_unconditional_checkpoint_writes(deployed: Deployed) -> None:
    (policy,) = resources_of_type(deployed(), "AWS::S3::BucketPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (guard,) = [s for s in statements if s["Action"] == "s3:PutObject"]
    assert guard["Effect"] == "Deny" and guard["Principal"] == "*"
    assert guard["Action"] == "s3:PutObject"
    assert guard["Resource"] == "<CheckpointBucket.Arn>/checkpoints/*"
    # Both keys in one Null block: denied only when neither header is present.
    assert guard["Condition"] == {"Null": {"s3:if-match": "true", "s3:if-none-match": "true"}}


def test_bucket_refuses_checkpoint_deletes_that_name_no_etag(deployed: Deployed) -> None:
    (policy,) = resources_of_type(deployed(), "AWS::S3::BucketPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    guards = [s for s in statements if s["Action"] == "s3:DeleteObject"]
    for guard in guards:
        assert guard["Effect"] == "Deny" and guard["Principal"] == "*"
        assert guard["Resource"] == "<CheckpointBucket.Arn>/checkpoints/*"
    # Denied without If-Match, and with If-Match: * (which fences nothing): only a delete at
    # the ETag that was judged goes through. S3 evaluates s3:if-match on DeleteObject.
    assert sorted(str(g["Condition"]) for g in guards) == sorted(
        [
            str({"Null": {"s3:if-match": "true"}}),
            str({"StringEquals": {"s3:if-match": "*"}}),
        ]
    )


def test_only_checkpoints_expire_and_message_bodies_are_kept(deployed: Deployed) -> None:
    rules = _bucket(deployed(CheckpointExpirationDays="4"))["LifecycleConfiguration"]["Rules"]
    expiring = [r for r in rules if {"ExpirationInDays", "ExpirationDate"} & set(r)]
    assert len(expiring) == 1
    (rule,) = expiring
    assert rule["Status"] == "Enabled"
    assert rule.get("Prefix") == "checkpoints/"
    assert "Filter" not in rule
    assert rule["ExpirationInDays"] == "4"
    # An interrupted multipart upload is never billed forever, in either prefix.
    assert any(
        "AbortIncompleteMultipartUpload" in r and not r.get("Prefix") and "Filter" not in r
        for r in rules
    )
    for r in rules:
        assert "messages" not in str(r.get("Prefix", "")) + str(r.get("Filter", ""))


def test_checkpoint_prefix_matches_environment_lifecycle_and_iam(template: dict[str, Any]) -> None:
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["AWAKEN_CHECKPOINT_PREFIX"] == "checkpoints/"


# ------------------------------------------------------------------ table


def test_table_keys_billing_pitr_encryption_and_retention(
    template: dict[str, Any], deployed: Deployed
) -> None:
    # The thread table; the WebSocket API's connection table is test_socket_api.py's.
    name = "ThreadTable"
    raw = template["Resources"][name]
    assert raw["DeletionPolicy"] == "Retain" and raw["UpdateReplacePolicy"] == "Retain"
    for protection in ("true", "false"):
        table = deployed(TableDeletionProtection=protection)[name]["Properties"]
        assert table["DeletionProtectionEnabled"] == protection
    # One definition: what create_table builds locally (tests, the demo, `awaken-s3 dev`).
    definition = table_definition()
    assert table["BillingMode"] == definition["BillingMode"] == "PAY_PER_REQUEST"
    assert table["KeySchema"] == definition["KeySchema"]
    assert table["AttributeDefinitions"] == definition["AttributeDefinitions"]
    assert table["GlobalSecondaryIndexes"] == definition["GlobalSecondaryIndexes"]
    assert [k["AttributeName"] for k in table["KeySchema"]] == ["pk", "sk"]
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["SSESpecification"]["SSEEnabled"] is True
    assert template["Parameters"]["TableDeletionProtection"]["Default"] == "true"


# ------------------------------------------------------------------ queue


def test_run_queue_is_fifo_with_explicit_dedup_encryption_and_a_fifo_dlq(
    deployed: Deployed,
) -> None:
    resources = deployed()
    queue = resources["RunQueue"]["Properties"]
    assert queue["FifoQueue"] is True
    assert queue["ContentBasedDeduplication"] is False
    assert queue["SqsManagedSseEnabled"] is True
    redrive = queue["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == "<RunDeadLetterQueue.Arn>"
    assert 1 < int(redrive["maxReceiveCount"]) <= 10
    dlq = resources["RunDeadLetterQueue"]["Properties"]
    assert dlq["FifoQueue"] is True and dlq["SqsManagedSseEnabled"] is True
    # A dead letter must outlive its source message so someone can look at it.
    assert int(dlq["MessageRetentionPeriod"]) > int(queue["MessageRetentionPeriod"])


def test_the_sweep_index_is_the_one_the_code_queries(deployed: Deployed) -> None:
    from awaken_s3.threads.expressions import sweep_index_definition

    table = deployed()["ThreadTable"]["Properties"]
    assert table["GlobalSecondaryIndexes"] == [sweep_index_definition()]


def test_only_the_run_queue_may_dead_letter_into_the_dlq(deployed: Deployed) -> None:
    resources = deployed()
    name = resources["RunQueue"]["Properties"]["QueueName"]
    assert name == "awaken-runs.fifo"  # the stack name is "awaken" in these tests
    allow = resources["RunDeadLetterQueue"]["Properties"]["RedriveAllowPolicy"]
    assert allow == {
        "redrivePermission": "byQueue",
        "sourceQueueArns": [f"arn:aws:sqs:us-east-1:123456789012:{name}"],
    }


@pytest.mark.parametrize("timeout", ["120", "300", "600", "900"])
def test_a_record_the_worker_never_reached_comes_back_soon_after_the_worker_timeout(
    template: dict[str, Any], deployed: Deployed, timeout: str
) -> None:
    # Lambda refuses an SQS trigger whose queue hides records for less than the function's
    # timeout; anything much longer only delays a record whose worker died before its claim
    # (after the claim the worker keeps the record's visibility in step with its lease).
    assert int(timeout) in template["Parameters"]["WorkerTimeout"]["AllowedValues"]
    resources = deployed(WorkerTimeout=timeout)
    worker = resources["WorkerFunction"]["Properties"]
    visibility = int(resources["RunQueue"]["Properties"]["VisibilityTimeout"])
    assert int(worker["Timeout"]) == int(timeout) <= 900
    assert int(timeout) <= visibility <= int(timeout) + 60


def test_a_dead_worker_s_record_returns_about_one_lease_period_later(deployed: Deployed) -> None:
    env = deployed()["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    lease = float(env["AWAKEN_LEASE_SECONDS"])
    margin = float(env["AWAKEN_VISIBILITY_MARGIN_SECONDS"])
    grace = StorageSettings.from_env(env).sweep_grace
    assert 0 < margin <= lease / 2
    # The sweeper waits past the record's own return before it re-sends a crashed run (by
    # more than Lambda's 10 s init limit), and every function derives the same grace.
    assert grace >= margin + 10
    for name in ("ApiFunction", "SweeperFunction"):
        other = deployed()[name]["Properties"]["Environment"]["Variables"]
        assert StorageSettings.from_env(other).sweep_grace == grace


def test_with_the_defaults_every_crash_is_resumed_within_three_lease_periods(
    template: dict[str, Any], deployed: Deployed
) -> None:
    # The bound of every recovery path (awaken_s3.service.liveness, docs/THREADS.md), plus
    # what comes on top of each (a receive, at most Lambda's 10 s init, a claim): the common
    # paths within two leases, every path within three.
    resources = deployed()
    env = resources["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    sweeper = resources["SweeperFunction"]["Properties"]
    (event,) = sweeper["Events"].values()
    assert event["Properties"]["Schedule"] == "rate(1 minute)"
    passes = SweeperSettings.from_env(sweeper["Environment"]["Variables"])
    # Its passes fit in the function's time, with ample time for the last one.
    assert (passes.passes - 1) * passes.pass_every + 10 <= int(sweeper["Timeout"])
    timing = Timing(
        lease=float(env["AWAKEN_LEASE_SECONDS"]),
        visibility_margin=float(env["AWAKEN_VISIBILITY_MARGIN_SECONDS"]),
        sweep_grace=StorageSettings.from_env(env).sweep_grace,
        queue_visibility=float(resources["RunQueue"]["Properties"]["VisibilityTimeout"]),
        sweep_period=passes.period,
    )
    assert timing.sweep_period == 15
    start = 10.0
    worst = {path: (timing.bound(path) + start) / timing.lease for path in Path}
    assert max(worst.values()) <= 3, worst
    # Only a death during the worker's init waits for the queue's own visibility timeout.
    assert all(worst[path] <= 2 for path in Path if path is not Path.IN_INIT), worst
    # A longer WorkerTimeout is the user's trade: its init deaths wait longer.
    slow = deployed(WorkerTimeout="900")["RunQueue"]["Properties"]["VisibilityTimeout"]
    assert int(slow) / timing.lease > 3


def test_the_sweeper_runs_alone_every_minute_with_only_what_it_needs(deployed: Deployed) -> None:
    resources = deployed()
    sweeper = resources["SweeperFunction"]["Properties"]
    assert sweeper["Handler"] == "handlers.sweeper.lambda_handler"
    assert sweeper["Role"] == "<SweeperRole.Arn>"
    assert int(sweeper["ReservedConcurrentExecutions"]) == 1
    (event,) = sweeper["Events"].values()
    assert (event["Type"], event["Properties"]["Schedule"]) == ("Schedule", "rate(1 minute)")
    grants = _granted(resources, "SweeperRole")
    assert grants == {
        "dynamodb:Query": {"<ThreadTable.Arn>/index/sweep"},
        "dynamodb:GetItem": {"<ThreadTable.Arn>"},
        "dynamodb:UpdateItem": {"<ThreadTable.Arn>"},
        "sqs:SendMessage": {"<RunQueue.Arn>"},
        # Leftover checkpoints: read and deleted, never written; listed under the prefix only.
        "s3:GetObject": {"<CheckpointBucket.Arn>/checkpoints/*"},
        "s3:DeleteObject": {"<CheckpointBucket.Arn>/checkpoints/*"},
        "s3:ListBucket": {"<CheckpointBucket.Arn>"},
        "logs:CreateLogStream": {"<SweeperLogGroup.Arn>"},
        "logs:PutLogEvents": {"<SweeperLogGroup.Arn>"},
    }
    (listing,) = [
        st for st in _statements(resources, "SweeperRole") if st["Action"] == "s3:ListBucket"
    ]
    assert listing["Condition"] == {"StringLikeIfExists": {"s3:prefix": "checkpoints/*"}}
    with_key = _granted(
        deployed(BucketKmsKeyArn="arn:aws:kms:us-east-1:123456789012:key/k"), "SweeperRole"
    )
    assert with_key["kms:Decrypt"] == {"arn:aws:kms:us-east-1:123456789012:key/k"}
    assert "kms:GenerateDataKey" not in with_key


def test_runs_the_sweeper_keeps_rescuing_or_abandons_raise_alarms(deployed: Deployed) -> None:
    resources = deployed(AlarmTopicArn="arn:aws:sns:us-east-1:123456789012:ops")
    for name, metric in (
        ("RescuedRepeatedlyAlarm", "RunsRescuedRepeatedly"),
        ("AbandonedRunsAlarm", "RunsAbandoned"),
    ):
        alarm = resources[name]["Properties"]
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AwakenS3", metric)
        # Powertools adds the service dimension to every metric it emits.
        assert alarm["Dimensions"] == [{"Name": "service", "Value": "awaken-s3"}]
        assert alarm["AlarmActions"] == ["arn:aws:sns:us-east-1:123456789012:ops"]


def test_every_allowed_worker_timeout_has_a_visibility_timeout(template: dict[str, Any]) -> None:
    allowed = {str(v) for v in template["Parameters"]["WorkerTimeout"]["AllowedValues"]}
    assert allowed == set(template["Mappings"]["WorkerTimeouts"])


def test_queues_refuse_requests_without_tls(deployed: Deployed) -> None:
    (policy,) = resources_of_type(deployed(), "AWS::SQS::QueuePolicy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert set(statement["Resource"]) == {"<RunQueue.Arn>", "<RunDeadLetterQueue.Arn>"}


def test_worker_consumes_the_queue_one_record_at_a_time_with_partial_failures(
    deployed: Deployed,
) -> None:
    worker = deployed()["WorkerFunction"]["Properties"]
    (event,) = worker["Events"].values()
    assert event["Type"] == "SQS"
    props = event["Properties"]
    assert props["Queue"] == "<RunQueue.Arn>"
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert 1 <= int(props["BatchSize"]) <= 5
    assert int(props["ScalingConfig"]["MaximumConcurrency"]) >= 2


# ------------------------------------------------------------------ functions


def test_handlers_runtime_and_timeouts(template: dict[str, Any], deployed: Deployed) -> None:
    globals_ = template["Globals"]["Function"]
    assert re.fullmatch(r"python3\.(1[1-9])", globals_["Runtime"])
    assert globals_["Architectures"] == ["arm64"]
    resources = deployed()
    worker = resources["WorkerFunction"]["Properties"]
    api = resources["ApiFunction"]["Properties"]
    assert worker["Handler"] == "handlers.worker.lambda_handler"
    assert api["Handler"] == "handlers.api.lambda_handler"
    # API Gateway gives up after 30 s; the worker's deadline margin must fit in its timeout.
    assert int(api["Timeout"]) < 30
    margin = int(globals_["Environment"]["Variables"]["AWAKEN_DEADLINE_MARGIN_SECONDS"])
    assert margin < int(worker["Timeout"]) <= 900
    for fn in (worker, api):
        assert fn["LoggingConfig"]["LogGroup"].startswith("<")
        assert "Policies" not in fn, "SAM would attach AWS-managed policies"
        assert fn["Role"] in {"<WorkerRole.Arn>", "<ApiRole.Arn>"}
    assert worker["Role"] != api["Role"]


def test_build_ships_the_package_through_the_makefile(template: dict[str, Any]) -> None:
    from tests.infra.cfn import TEMPLATE_PATH

    code_uri = template["Globals"]["Function"]["CodeUri"]
    makefile = (TEMPLATE_PATH.parent / code_uri / "Makefile").read_text(encoding="utf-8")
    for name in (
        "WorkerFunction",
        "ApiFunction",
        "SweeperFunction",
        "SocketFunction",
        "SocketAuthorizerFunction",
    ):
        metadata = template["Resources"][name]["Metadata"]
        assert metadata == {"BuildMethod": "makefile", "WorkingDirectory": "."}
        assert f"build-{name}" in makefile
    version = template["Globals"]["Function"]["Runtime"].removeprefix("python")
    assert f"LAMBDA_PYTHON_VERSION ?= {version}" in makefile
    assert "aarch64" in makefile


def test_environment_names_are_the_handler_contract(deployed: Deployed) -> None:
    minimal = deployed()["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    full = deployed(
        Provider="openai",
        Model="gpt-4.1",
        OpenAIBaseUrl="https://llm.example/v1",
        ApiKeyParameterName="/awaken/k",
    )["ApiFunction"]["Properties"]["Environment"]["Variables"]
    secret = deployed(Provider="anthropic", Model="claude-sonnet-4-5", ApiKeySecret="s")
    secret_env = secret["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    names = set(full) | set(secret_env)
    assert names - {"AWAKEN_API_KEY_SECRET_FIELD", "POWERTOOLS_LOGGER_LOG_EVENT"} == CONTRACT_ENV
    # The API's events hold the caller's bearer token.
    assert full["POWERTOOLS_LOGGER_LOG_EVENT"] == "false"
    # Unset options are absent, not empty strings.
    assert not {"AWAKEN_OPENAI_BASE_URL", "AWAKEN_API_KEY_PARAM", "AWAKEN_API_KEY_SECRET"} & set(
        minimal
    )
    assert full["AWAKEN_API_KEY_PARAM"] == "/awaken/k"
    assert full["AWAKEN_PROVIDER"] == "openai"
    assert full["AWAKEN_QUEUE_URL"] == "<RunQueue>"
    assert minimal["AWAKEN_DEADLINE_MARGIN_SECONDS"] == "10"
    assert minimal["AWAKEN_LEASE_SECONDS"] == "60"


# ------------------------------------------------------------------ HTTP API


@pytest.mark.parametrize("auth_mode", ["cognito", "jwt"])
def test_every_route_is_behind_the_jwt_authorizer(deployed: Deployed, auth_mode: str) -> None:
    # Which issuer and audiences, per AuthMode, is test_callers.py's.
    own_issuer = {**BRING_YOUR_OWN_ISSUER, "JwtAudience": "a,b"}
    resources = deployed(**(own_issuer if auth_mode == "jwt" else {}))
    api = resources["HttpApi"]["Properties"]
    auth = api["Auth"]
    jwt = auth["Authorizers"][auth["DefaultAuthorizer"]]
    assert jwt["IdentitySource"] == "$request.header.Authorization"
    assert jwt["JwtConfiguration"]["issuer"].startswith("https://")
    expected = ["a", "b"] if auth_mode == "jwt" else ["<UserPoolClient>"]
    assert jwt["JwtConfiguration"]["audience"] == expected
    # Which routes there are is the service's table (test_local_stack.py compares them).
    routes = 0
    for fn in resources_of_type(resources, "AWS::Serverless::Function").values():
        for event in fn["Properties"].get("Events", {}).values():
            if event["Type"] != "HttpApi":
                continue
            props = event["Properties"]
            assert props["ApiId"] == "<HttpApi>", "a route on SAM's implicit API has no authorizer"
            assert "Auth" not in props, "routes inherit the default JWT authorizer"
            routes += 1
    assert routes
    assert not resources_of_type(resources, "AWS::Serverless::Api")


def test_api_stage_is_throttled_and_access_logs_hold_no_headers(deployed: Deployed) -> None:
    api = deployed(ApiThrottlingRateLimit="7", ApiThrottlingBurstLimit="9")["HttpApi"]
    settings = api["Properties"]["DefaultRouteSettings"]
    assert settings == {"ThrottlingRateLimit": "7", "ThrottlingBurstLimit": "9"}
    log_format = api["Properties"]["AccessLogSettings"]["Format"]
    assert "$context.authorizer.claims.sub" in log_format
    assert "header" not in log_format.lower() and "body" not in log_format.lower()


# ------------------------------------------------------------------ IAM


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.get("Provider", "defaults"))
def test_no_wildcard_actions_or_resources(deployed: Deployed, variant: dict[str, str]) -> None:
    resources = deployed(**variant)
    roles = resources_of_type(resources, "AWS::IAM::Role")
    assert set(roles) == {
        "WorkerRole",
        "ApiRole",
        "SweeperRole",
        "SocketRole",
        "SocketAuthorizerRole",
    }
    for name, role in roles.items():
        assert "ManagedPolicyArns" not in role["Properties"]
        for statement in role_statements(role):
            assert statement["Effect"] == "Allow"
            for action in as_list(statement["Action"]):
                assert "*" not in action, (name, action)
            for resource in as_list(statement["Resource"]):
                assert resource != "*", (name, statement)
                if resource.endswith("/live/POST/@connections/*"):
                    # Connection ids are made by API Gateway: the grant names the API and
                    # stage, and only the call that posts a frame.
                    assert statement["Action"] == "execute-api:ManageConnections"
                    continue
                if "*" in resource.replace("/checkpoints/*", "").replace("/messages/*", ""):
                    # The one wildcard AWS requires: the Regions a cross-Region inference
                    # profile may route to, limited to calls made through that profile.
                    assert statement["Action"] == "bedrock:InvokeModelWithResponseStream"
                    assert "bedrock:InferenceProfileArn" in statement["Condition"]["StringEquals"]


def test_worker_grants_are_exactly_its_needs(deployed: Deployed) -> None:
    grants = _granted(deployed(), "WorkerRole")
    objects = {"<CheckpointBucket.Arn>/checkpoints/*", "<CheckpointBucket.Arn>/messages/*"}
    for action in ("s3:GetObject", "s3:PutObject"):
        assert grants[action] == objects
    # Message bodies are the durable half of the transcript: nothing deletes them.
    assert grants["s3:DeleteObject"] == {"<CheckpointBucket.Arn>/checkpoints/*"}
    assert grants["s3:ListBucket"] == {"<CheckpointBucket.Arn>"}
    (listing,) = [
        s for s in _statements(deployed(), "WorkerRole") if s["Action"] == "s3:ListBucket"
    ]
    assert listing["Condition"] == {"StringLikeIfExists": {"s3:prefix": "checkpoints/*"}}
    table, connections = {"<ThreadTable.Arn>"}, {"<ConnectionTable.Arn>"}
    for action in ("PutItem", "ConditionCheckItem"):
        assert grants[f"dynamodb:{action}"] == table
    for action in ("GetItem", "UpdateItem", "Query"):
        assert grants[f"dynamodb:{action}"] == table | connections
    # Live pushes: a gone connection is forgotten; nothing of the thread table is deleted.
    assert grants["dynamodb:DeleteItem"] == connections
    assert grants["execute-api:ManageConnections"] == {
        "arn:aws:execute-api:us-east-1:123456789012:<SocketApi>/live/POST/@connections/*"
    }
    assert grants["sqs:SendMessage"] == {"<RunQueue.Arn>"}
    assert grants["sqs:ReceiveMessage"] == {"<RunQueue.Arn>"}
    assert grants["sqs:ChangeMessageVisibility"] == {"<RunQueue.Arn>"}
    assert grants["logs:PutLogEvents"] == {"<WorkerLogGroup.Arn>"}
    assert not any(a.startswith(("dynamodb:Scan", "dynamodb:Batch")) for a in grants)


def test_api_reads_checkpoints_marks_them_for_a_cancel_and_cannot_touch_models_or_keys(
    deployed: Deployed,
) -> None:
    for variant in VARIANTS:
        grants = _granted(deployed(**variant), "ApiRole")
        # Reads checkpoints (the live partial view) and puts one again for a cancel (the
        # bucket policy admits only a conditional put); never deletes one.
        assert grants["s3:GetObject"] == {
            "<CheckpointBucket.Arn>/messages/*",
            "<CheckpointBucket.Arn>/checkpoints/*",
        }
        assert grants["s3:PutObject"] == {
            "<CheckpointBucket.Arn>/messages/*",
            "<CheckpointBucket.Arn>/checkpoints/*",
        }
        assert grants["s3:ListBucket"] == {"<CheckpointBucket.Arn>"}
        (listing,) = [
            s for s in _statements(deployed(**variant), "ApiRole") if s["Action"] == "s3:ListBucket"
        ]
        assert listing["Condition"] == {"StringLikeIfExists": {"s3:prefix": "checkpoints/*"}}
        s3_actions = {a for a in grants if a.startswith("s3:")}
        assert s3_actions == {"s3:GetObject", "s3:PutObject", "s3:ListBucket"}
        assert not [a for a in grants if a.startswith(("bedrock:", "ssm:", "secretsmanager:"))]
        assert "s3:DeleteObject" not in grants and "sqs:ReceiveMessage" not in grants
        assert grants["sqs:SendMessage"] == {"<RunQueue.Arn>"}
        assert grants["dynamodb:UpdateItem"] == {"<ThreadTable.Arn>"}
        # A cancel tells the run's live followers (it reads and forgets, never records them).
        assert grants["dynamodb:DeleteItem"] == {"<ConnectionTable.Arn>"}
        assert "dynamodb:PutItem" not in {
            a for a, on in grants.items() if "<ConnectionTable.Arn>" in on
        }


def test_bedrock_is_granted_only_for_the_bedrock_provider_and_its_model(
    deployed: Deployed,
) -> None:
    model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    grants = _granted(deployed(Provider="bedrock", Model=model), "WorkerRole")
    profile = f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{model}"
    assert grants["bedrock:InvokeModelWithResponseStream"] == {
        f"arn:aws:bedrock:us-east-1::foundation-model/{model}",
        profile,
        "arn:aws:bedrock:*::foundation-model/*",
    }
    (conditioned,) = [
        s
        for s in _statements(deployed(Provider="bedrock", Model=model), "WorkerRole")
        if s.get("Condition") and str(s["Action"]).startswith("bedrock:")
    ]
    assert conditioned["Condition"] == {"StringEquals": {"bedrock:InferenceProfileArn": profile}}
    for provider in ("anthropic", "openai"):
        grants = _granted(
            deployed(Provider=provider, Model="m", ApiKeyParameterName="p"), "WorkerRole"
        )
        assert not [a for a in grants if a.startswith("bedrock:")]


def test_api_key_read_is_granted_only_on_the_configured_location(deployed: Deployed) -> None:
    assert not [
        a
        for a in _granted(deployed(), "WorkerRole")
        if a.startswith(("ssm:", "secretsmanager:", "kms:"))
    ]
    base = {"Provider": "anthropic", "Model": "claude-sonnet-4-5"}
    for name, arn in (
        ("/awaken/key", "arn:aws:ssm:us-east-1:123456789012:parameter/awaken/key"),
        ("awaken-key", "arn:aws:ssm:us-east-1:123456789012:parameter/awaken-key"),
    ):
        grants = _granted(deployed(**base, ApiKeyParameterName=name), "WorkerRole")
        assert grants["ssm:GetParameter"] == {arn}
        assert "secretsmanager:GetSecretValue" not in grants
    for secret, arn in (
        ("awaken/k", "arn:aws:secretsmanager:us-east-1:123456789012:secret:awaken/k-??????"),
        (
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:k-AbCdEf",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:k-AbCdEf",
        ),
    ):
        grants = _granted(deployed(**base, ApiKeySecret=secret), "WorkerRole")
        assert grants["secretsmanager:GetSecretValue"] == {arn}
        assert "ssm:GetParameter" not in grants
    key = "arn:aws:kms:us-east-1:123456789012:key/1"
    statements = _statements(
        deployed(**base, ApiKeyParameterName="/k", ApiKeyKmsKeyArn=key), "WorkerRole"
    )
    (decrypt,) = [s for s in statements if s["Action"] == "kms:Decrypt"]
    assert decrypt["Resource"] == key
    assert set(decrypt["Condition"]["StringEquals"]["kms:ViaService"]) == {
        "ssm.us-east-1.amazonaws.com",
        "secretsmanager.us-east-1.amazonaws.com",
    }


def test_the_worker_gets_what_a_project_s_tools_need_and_only_when_given(
    deployed: Deployed,
) -> None:
    plain = deployed()
    assert "ManagedPolicyArns" not in plain["WorkerRole"]["Properties"]
    assert not [a for a in _granted(plain, "WorkerRole") if a.startswith("secretsmanager:")]
    worker_env = plain["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert "AWAKEN_TOOL_ENVIRONMENT" not in worker_env

    policies = "arn:aws:iam::aws:policy/AmazonSESFullAccess,arn:aws:iam::123456789012:policy/t"
    secrets = (
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:tickets-AbCdEf,"
        "arn:aws:ssm:us-east-1:123456789012:parameter/tickets/url"
    )
    tools = deployed(
        WorkerPolicyArns=policies,
        ToolSecretArns=secrets,
        ToolEnvironment='{"TICKETS_URL": "https://tickets.example"}',
    )
    assert tools["WorkerRole"]["Properties"]["ManagedPolicyArns"] == policies.split(",")
    grants = _granted(tools, "WorkerRole")
    assert grants["secretsmanager:GetSecretValue"] == set(secrets.split(","))
    assert grants["ssm:GetParameter"] == set(secrets.split(","))
    env = tools["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert env["AWAKEN_TOOL_ENVIRONMENT"] == '{"TICKETS_URL": "https://tickets.example"}'
    # Tools run in the worker only: the API and the sweeper get none of it.
    for role in ("ApiRole", "SweeperRole"):
        assert "ManagedPolicyArns" not in tools[role]["Properties"]
        assert _granted(tools, role) == _granted(plain, role)
    for function in ("ApiFunction", "SweeperFunction"):
        assert (
            "AWAKEN_TOOL_ENVIRONMENT"
            not in (tools[function]["Properties"]["Environment"]["Variables"])
        )


def test_rules_reject_a_hosted_provider_without_key_or_model(template: dict[str, Any]) -> None:
    rules = template["Rules"]

    def holds(rule: str, **parameters: str) -> bool:
        resolver = Resolver(template, **parameters)
        body = rules[rule]
        if "RuleCondition" in body and not resolver.resolve(body["RuleCondition"]):
            return True
        return all(resolver.resolve(a["Assert"]) for a in body["Assertions"])

    assert holds("HostedProviderNeedsKey")  # bedrock defaults
    assert not holds("HostedProviderNeedsKey", Provider="anthropic", Model="claude-sonnet-4-5")
    assert not holds("HostedProviderNeedsKey", Provider="anthropic", ApiKeyParameterName="/k")
    assert holds(
        "HostedProviderNeedsKey", Provider="anthropic", Model="claude-x", ApiKeyParameterName="/k"
    )
    assert holds(
        "HostedProviderNeedsKey", Provider="openai", Model="m", OpenAIBaseUrl="http://vllm/v1"
    )
    assert not holds("OneKeyLocation", ApiKeyParameterName="/k", ApiKeySecret="s")
    assert holds("OneKeyLocation", ApiKeySecret="s")


def test_outputs_name_what_a_caller_needs(template: dict[str, Any]) -> None:
    assert {"ApiUrl", "BucketName", "TableName", "QueueUrl"} <= set(template["Outputs"])


def test_dead_letters_raise_an_alarm(deployed: Deployed) -> None:
    topic = "arn:aws:sns:us-east-1:123456789012:ops"
    for parameters, actions in (({}, None), ({"AlarmTopicArn": topic}, [topic])):
        props = deployed(**parameters)["DeadLetterAlarm"]["Properties"]
        assert props["Dimensions"] == [
            {"Name": "QueueName", "Value": "<RunDeadLetterQueue.QueueName>"}
        ]
        assert props["MetricName"] == "ApproximateNumberOfMessagesVisible"
        assert props["ComparisonOperator"] == "GreaterThanThreshold" and props["Threshold"] == 0
        assert props.get("AlarmActions") == actions
