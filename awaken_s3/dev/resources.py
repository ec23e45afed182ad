"""The bucket, table and queues of the stack, created the way template.yaml declares them.

The queue attributes below are the template's (tests/infra compares them property by
property), and the table comes from :func:`awaken_s3.threads.expressions.table_definition`,
which the template is checked against too: a local stack cannot drift from a deployed one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from awaken_s3.models import StreamCheckpoint

#: RunQueue's properties in template.yaml, but for its name, visibility and redrive policy
RUN_QUEUE_PROPERTIES: Final[dict[str, Any]] = {
    "FifoQueue": True,
    "ContentBasedDeduplication": False,
    "DeduplicationScope": "messageGroup",
    "FifoThroughputLimit": "perMessageGroupId",
    "MessageRetentionPeriod": 345600,
    "SqsManagedSseEnabled": True,
}
#: RunQueue's RedrivePolicy.maxReceiveCount
MAX_RECEIVE_COUNT: Final = 5
#: RunDeadLetterQueue's properties, but for its RedriveAllowPolicy
DEAD_LETTER_QUEUE_PROPERTIES: Final[dict[str, Any]] = {
    "FifoQueue": True,
    "MessageRetentionPeriod": 1209600,
    "SqsManagedSseEnabled": True,
}
#: the WorkerTimeouts mapping: a record no worker reached comes back this long after the
#: worker's timeout (after its claim, the worker keeps the record hidden itself)
VISIBILITY_OVER_TIMEOUT: Final = 30


def visibility_timeout(worker_timeout: int) -> int:
    """The run queue's VisibilityTimeout for a worker timeout (template: WorkerTimeouts)."""
    return worker_timeout + VISIBILITY_OVER_TIMEOUT


def sqs_attributes(properties: dict[str, Any]) -> dict[str, str]:
    """CloudFormation queue properties as SQS ``CreateQueue`` attributes (all strings)."""
    return {
        name: (str(value).lower() if isinstance(value, bool) else str(value))
        for name, value in properties.items()
    }


@dataclass(frozen=True)
class StackNames:
    bucket: str
    table: str
    queue: str
    dead_letter_queue: str
    #: the WebSocket API's connection records
    connections: str = ""

    @classmethod
    def from_name(cls, name: str) -> StackNames:
        # The template names the run queue "<stack>-runs.fifo"; its DLQ is unnamed there.
        return cls(
            bucket=name,
            table=name,
            queue=f"{name}-runs.fifo",
            dead_letter_queue=f"{name}-dead-letters.fifo",
            connections=f"{name}-connections",
        )


@dataclass(frozen=True)
class Stack:
    names: StackNames
    queue_url: str
    dead_letter_queue_url: str


def create_bucket(s3: Any, bucket: str, region: str) -> None:
    from botocore.exceptions import ClientError

    from awaken_s3.threads.client_errors import error_code

    args: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        args["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        s3.create_bucket(**args)
    except ClientError as exc:
        if error_code(exc) != "BucketAlreadyOwnedByYou":
            raise


def create_table(dynamodb: Any, table: str) -> None:
    from botocore.exceptions import ClientError

    from awaken_s3.threads.client_errors import error_code
    from awaken_s3.threads.expressions import table_definition

    try:
        dynamodb.create_table(TableName=table, **table_definition())
    except ClientError as exc:
        if error_code(exc) != "ResourceInUseException":
            raise
    dynamodb.get_waiter("table_exists").wait(TableName=table)


def create_connection_table(dynamodb: Any, table: str) -> None:
    """The WebSocket API's connection table, with its TTL (template: ConnectionTable)."""
    from botocore.exceptions import ClientError

    from awaken_s3.service.connections import TTL_ATTRIBUTE
    from awaken_s3.service.connections import table_definition as connection_table
    from awaken_s3.threads.client_errors import error_code

    try:
        dynamodb.create_table(TableName=table, **connection_table())
    except ClientError as exc:
        if error_code(exc) != "ResourceInUseException":
            raise
    dynamodb.get_waiter("table_exists").wait(TableName=table)
    ttl = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
        dynamodb.update_time_to_live(
            TableName=table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
        )


def create_queues(sqs: Any, names: StackNames, *, worker_timeout: int) -> tuple[str, str]:
    """The dead-letter queue, then the run queue redriving into it; (run, dead-letter) URLs."""
    dlq_url = str(
        sqs.create_queue(
            QueueName=names.dead_letter_queue,
            Attributes=sqs_attributes(DEAD_LETTER_QUEUE_PROPERTIES),
        )["QueueUrl"]
    )
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    attributes = sqs_attributes(
        {**RUN_QUEUE_PROPERTIES, "VisibilityTimeout": visibility_timeout(worker_timeout)}
    )
    attributes["RedrivePolicy"] = json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(MAX_RECEIVE_COUNT)}
    )
    queue_url = str(sqs.create_queue(QueueName=names.queue, Attributes=attributes)["QueueUrl"])
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    # Only the run queue may dead-letter here (the template's RedriveAllowPolicy).
    sqs.set_queue_attributes(
        QueueUrl=dlq_url,
        Attributes={
            "RedriveAllowPolicy": json.dumps(
                {"redrivePermission": "byQueue", "sourceQueueArns": [queue_arn]}
            )
        },
    )
    return queue_url, dlq_url


def function_environment(stack: Stack, *, lease_seconds: float) -> dict[str, str]:
    """The environment template.yaml gives the functions, on a local ``stack`` (the dev
    server's, a test harness's), with the lease a local stack wants: short, so that a killed
    worker's run resumes within seconds."""
    from awaken_s3.settings import DEFAULT_CHECKPOINT_PREFIX

    return {
        "AWAKEN_BUCKET": stack.names.bucket,
        "AWAKEN_TABLE": stack.names.table,
        "AWAKEN_QUEUE_URL": stack.queue_url,
        "AWAKEN_CONNECTIONS_TABLE": stack.names.connections,
        "AWAKEN_CHECKPOINT_PREFIX": DEFAULT_CHECKPOINT_PREFIX,
        "AWAKEN_DEADLINE_MARGIN_SECONDS": "10",
        "AWAKEN_LEASE_SECONDS": str(lease_seconds),
        "AWAKEN_VISIBILITY_MARGIN_SECONDS": "1",
        "AWAKEN_MAX_IDLE_SUSPENSIONS": "5",
        "POWERTOOLS_SERVICE_NAME": "awaken-s3",
        "POWERTOOLS_METRICS_NAMESPACE": "AwakenS3",
        "POWERTOOLS_LOGGER_LOG_EVENT": "false",
    }


def create_stack(
    session: Any, names: StackNames, *, region: str, worker_timeout: int, endpoint_url: str | None
) -> Stack:
    """Create (or find) the stack's storage with a boto3 ``session``; idempotent."""

    def client(service: str) -> Any:
        return session.client(service, region_name=region, endpoint_url=endpoint_url)

    create_bucket(client("s3"), names.bucket, region)
    create_table(client("dynamodb"), names.table)
    create_connection_table(client("dynamodb"), names.connections)
    queue_url, dlq_url = create_queues(client("sqs"), names, worker_timeout=worker_timeout)
    return Stack(names, queue_url, dlq_url)


def read_checkpoint(s3: Any, bucket: str, run_id: str) -> tuple[StreamCheckpoint, str] | None:
    """A run's checkpoint and its ETag, read with a boto3 S3 client; None when there is none
    (or none that decodes)."""
    from botocore.exceptions import ClientError

    from awaken_s3.errors import StreamCheckpointError
    from awaken_s3.models import decode_checkpoint
    from awaken_s3.settings import DEFAULT_CHECKPOINT_PREFIX
    from awaken_s3.stores.s3_protocol import object_key

    try:
        answer = s3.get_object(Bucket=bucket, Key=object_key(DEFAULT_CHECKPOINT_PREFIX, run_id))
    except ClientError:
        return None
    version = str(answer["ETag"])
    try:
        return decode_checkpoint(answer["Body"].read(), run_id=run_id, version=version), version
    except StreamCheckpointError:
        return None
