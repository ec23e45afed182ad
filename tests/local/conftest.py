"""Fixtures for the local event source tests: fresh queues on the suite's moto server, the
test handlers' log, and condition waits (bounded only to fail a hung test, never to judge
speed)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest

from awaken_s3.local.containers import FunctionConfig
from awaken_s3.local.moto import MotoServer
from tests.fixtures import processes

HANDLER = "tests.local.handlers:lambda_handler"
#: an upper bound that only a hung test reaches
HUNG = 60.0


@dataclass
class Sqs:
    endpoint_url: str
    client: Any = field(repr=False)

    def queue(
        self,
        *,
        fifo: bool = False,
        visibility: int = 1,
        max_receive_count: int | None = None,
    ) -> tuple[str, str | None]:
        """A fresh queue (and its dead-letter queue when ``max_receive_count`` is given)."""
        suffix = ".fifo" if fifo else ""
        name = uuid.uuid4().hex[:12]
        attributes = {"VisibilityTimeout": str(visibility)}
        if fifo:
            attributes["FifoQueue"] = "true"
        dlq_url = None
        if max_receive_count is not None:
            dlq_url = self.client.create_queue(
                QueueName=f"dlq-{name}{suffix}", Attributes={"FifoQueue": "true"} if fifo else {}
            )["QueueUrl"]
            arn = self.client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])
            attributes["RedrivePolicy"] = json.dumps(
                {
                    "deadLetterTargetArn": arn["Attributes"]["QueueArn"],
                    "maxReceiveCount": str(max_receive_count),
                }
            )
        url = self.client.create_queue(QueueName=f"q-{name}{suffix}", Attributes=attributes)
        return str(url["QueueUrl"]), dlq_url

    def send(self, url: str, body: dict[str, Any], *, group: str | None = None) -> str:
        args: dict[str, Any] = {"QueueUrl": url, "MessageBody": json.dumps(body)}
        if group is not None:
            args["MessageGroupId"] = group
            args["MessageDeduplicationId"] = uuid.uuid4().hex
        return str(self.client.send_message(**args)["MessageId"])

    def counts(self, url: str) -> tuple[int, int]:
        """(visible, in flight) messages."""
        answer = self.client.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return (
            int(answer["ApproximateNumberOfMessages"]),
            int(answer["ApproximateNumberOfMessagesNotVisible"]),
        )


@pytest.fixture
def sqs(moto_server: MotoServer) -> Sqs:
    return Sqs(moto_server.endpoint_url, boto3.client("sqs", endpoint_url=moto_server.endpoint_url))


class HandlerLog:
    """The lines the test handlers appended."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self, phase: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        entries = [json.loads(line) for line in self.path.read_text().splitlines() if line]
        return [e for e in entries if phase is None or e["phase"] == phase]

    def records(self, record_id: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.lines("record") if record_id is None or e["id"] == record_id]


@pytest.fixture
def handler_log(tmp_path: Path) -> HandlerLog:
    return HandlerLog(tmp_path / "handlers.jsonl")


def function(
    handler_log: HandlerLog,
    sqs: Sqs,
    queue_url: str,
    *,
    timeout: float = 10.0,
    handler: str = HANDLER,
) -> FunctionConfig:
    return FunctionConfig(
        handler=handler,
        timeout=timeout,
        env={
            "EMULATOR_LOG": str(handler_log.path),
            "EMULATOR_QUEUE_URL": queue_url,
            "AWS_ENDPOINT_URL": sqs.endpoint_url,
        },
        name="emulated",
        memory_mb=256,
    )


def provision(sqs: Sqs, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """The bucket and table ``env`` names (``AWAKEN_BUCKET``, ``AWAKEN_TABLE``) on the suite's
    moto server, and ``env`` set for this process's handlers (the API's, the sweeper's)."""
    import aioboto3

    from awaken_s3.threads import create_table

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    boto3.client("s3", endpoint_url=sqs.endpoint_url).create_bucket(Bucket=env["AWAKEN_BUCKET"])

    async def make_table() -> None:
        async with aioboto3.Session().client("dynamodb", endpoint_url=sqs.endpoint_url) as db:
            await create_table(db, env["AWAKEN_TABLE"])

    asyncio.run(make_table())


async def eventually(condition: Callable[[], bool], *, what: str, bound: float = HUNG) -> None:
    """Wait until ``condition()`` holds; the bound only catches a hung test."""
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {bound}s for {what}")
        await asyncio.sleep(0.05)


def eventually_sync(condition: Callable[[], bool], *, what: str, bound: float = HUNG) -> None:
    processes.eventually_sync(condition, what=what, bound=bound)
