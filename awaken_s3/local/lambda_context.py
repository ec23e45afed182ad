"""The Lambda context object and the names Lambda gives a function and its containers (pure).

The context mirrors the Python runtime's own (``awslambdaric``): the function's name, version,
memory size, log group and log stream come from the container's ``AWS_LAMBDA_*`` environment
variables, so ``memory_limit_in_mb`` is a string there as on Lambda; the request id, the
invoked ARN and the deadline come with each invocation. This module is imported by every
container, so it imports nothing heavy.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

FUNCTION_VERSION = "$LATEST"


def function_arn(region: str, account: str, name: str) -> str:
    return f"arn:aws:lambda:{region}:{account}:function:{name}"


def log_group_name(function_name: str) -> str:
    return f"/aws/lambda/{function_name}"


def new_log_stream_name(now: datetime | None = None) -> str:
    """A container's log stream, in Lambda's shape: ``2026/01/31/[$LATEST]<32 hex>``."""
    day = (now or datetime.now(UTC)).strftime("%Y/%m/%d")
    return f"{day}/[{FUNCTION_VERSION}]{uuid.uuid4().hex}"


def container_environment(
    *,
    function_name: str,
    handler: str,
    memory_mb: int,
    region: str,
    log_stream_name: str,
    task_root: str,
) -> dict[str, str]:
    """The reserved variables Lambda sets in every container (it refuses them in a function's
    own environment, so they override it here too)."""
    return {
        "AWS_LAMBDA_FUNCTION_NAME": function_name,
        "AWS_LAMBDA_FUNCTION_VERSION": FUNCTION_VERSION,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory_mb),
        "AWS_LAMBDA_LOG_GROUP_NAME": log_group_name(function_name),
        "AWS_LAMBDA_LOG_STREAM_NAME": log_stream_name,
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "LAMBDA_TASK_ROOT": task_root,
        "_HANDLER": handler,
    }


@dataclass(frozen=True)
class InvocationHeaders:
    """What the runtime learns per invocation (Lambda sends these as HTTP headers)."""

    aws_request_id: str
    invoked_function_arn: str
    #: Unix epoch milliseconds, like ``Lambda-Runtime-Deadline-Ms``
    deadline_ms: int

    def to_wire(self) -> dict[str, Any]:
        return {
            "aws_request_id": self.aws_request_id,
            "invoked_function_arn": self.invoked_function_arn,
            "deadline_ms": self.deadline_ms,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> InvocationHeaders:
        return cls(
            aws_request_id=str(data["aws_request_id"]),
            invoked_function_arn=str(data["invoked_function_arn"]),
            deadline_ms=int(data["deadline_ms"]),
        )


@dataclass
class LocalLambdaContext:
    """The attributes and method of the Python runtime's ``LambdaContext``."""

    aws_request_id: str
    invoked_function_arn: str
    deadline_ms: int
    function_name: str | None = None
    function_version: str | None = None
    memory_limit_in_mb: str | None = None
    log_group_name: str | None = None
    log_stream_name: str | None = None
    identity: Any = None
    client_context: Any = None
    tenant_id: str | None = None
    clock: Callable[[], float] = field(default=time.time, repr=False)

    @classmethod
    def for_invocation(
        cls,
        headers: InvocationHeaders,
        environ: Mapping[str, str] = os.environ,
        clock: Callable[[], float] = time.time,
    ) -> LocalLambdaContext:
        return cls(
            aws_request_id=headers.aws_request_id,
            invoked_function_arn=headers.invoked_function_arn,
            deadline_ms=headers.deadline_ms,
            function_name=environ.get("AWS_LAMBDA_FUNCTION_NAME"),
            function_version=environ.get("AWS_LAMBDA_FUNCTION_VERSION"),
            memory_limit_in_mb=environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"),
            log_group_name=environ.get("AWS_LAMBDA_LOG_GROUP_NAME"),
            log_stream_name=environ.get("AWS_LAMBDA_LOG_STREAM_NAME"),
            clock=clock,
        )

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(self.clock() * 1000))


def in_process_context(
    name: str, *, region: str, timeout: float, log_stream_name: str = "local"
) -> LocalLambdaContext:
    """The context of one invocation of function ``name`` made in this process (the dev
    server's and a test harness's API and sweeper), its deadline ``timeout`` seconds away."""
    return LocalLambdaContext(
        aws_request_id=str(uuid.uuid4()),
        invoked_function_arn=function_arn(region, "123456789012", name),
        deadline_ms=int((time.time() + timeout) * 1000),
        function_name=name,
        function_version=FUNCTION_VERSION,
        memory_limit_in_mb="512",
        log_group_name=log_group_name(name),
        log_stream_name=log_stream_name,
    )
