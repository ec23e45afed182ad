"""Tiny Lambda handlers for the event source tests, run inside local containers.

Every invocation appends JSON lines to the file named by ``EMULATOR_LOG``: one ``start`` line
(the pid, the context, the whole event), one line per record as it is processed, and one
``end`` line. A record's body says what to do with it: ``{"id": ..., "do": ACTION, ...}``.
Actions ending in ``_first`` act only on the record's first receive and succeed afterwards.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def log(**entry: Any) -> None:
    line = json.dumps({"pid": os.getpid(), "at": time.monotonic(), **entry}) + "\n"
    # One write per line on an O_APPEND file: lines of concurrent containers never interleave.
    fd = os.open(os.environ["EMULATOR_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@contextlib.contextmanager
def group_lock(group: str | None) -> Iterator[bool]:
    """Hold an exclusive lock named after the message group; yields False if another
    container holds it (two batches of one group in flight at once)."""
    if group is None:
        yield True
        return
    path = Path(os.environ["EMULATOR_LOG"]).with_suffix(f".{group}.lock")
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def change_visibility(receipt_handle: str, seconds: int) -> None:
    import boto3

    boto3.client("sqs").change_message_visibility(
        QueueUrl=os.environ["EMULATOR_QUEUE_URL"],
        ReceiptHandle=receipt_handle,
        VisibilityTimeout=seconds,
    )


def handle_record(record: dict[str, Any]) -> bool:
    """Process one record; False if it failed."""
    body = json.loads(record["body"])
    action: str = body.get("do", "ok")
    first = record["attributes"]["ApproximateReceiveCount"] == "1"
    if action.endswith("_first"):
        if not first:
            return True
        action = action.removesuffix("_first")
    if action == "fail":
        return False
    if action == "raise":
        raise RuntimeError(f"record {body['id']} raised")
    if action == "sleep":
        time.sleep(float(body["seconds"]))
    elif action == "block":
        time.sleep(3600)
    elif action == "visibility":
        change_visibility(record["receiptHandle"], int(body["seconds"]))
        return False
    elif action == "zombie":
        # The first receive outlives its visibility (a zombie); a later one holds the record
        # (as a worker keeps its record hidden) and works on it a while.
        if first:
            time.sleep(float(body["first"]))
        else:
            change_visibility(record["receiptHandle"], 30)
            time.sleep(float(body["then"]))
    elif action == "spawn_and_block":
        child = subprocess.Popen(["sleep", "300"])
        log(phase="spawned", child=child.pid)
        time.sleep(3600)
    elif action == "exit":
        os._exit(3)
    elif action == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def lambda_handler(event: dict[str, Any], context: Any) -> Any:
    remaining = context.get_remaining_time_in_millis()
    log(
        phase="start",
        request_id=context.aws_request_id,
        function_name=context.function_name,
        function_version=context.function_version,
        memory_limit_in_mb=context.memory_limit_in_mb,
        invoked_function_arn=context.invoked_function_arn,
        log_group_name=context.log_group_name,
        log_stream_name=context.log_stream_name,
        env_log_stream=os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME"),
        remaining_ms=remaining,
        event=event,
    )
    time.sleep(0.05)
    log(
        phase="remaining",
        request_id=context.aws_request_id,
        remaining_ms=context.get_remaining_time_in_millis(),
    )
    failures = []
    for record in event["Records"]:
        body = json.loads(record["body"])
        group = record["attributes"].get("MessageGroupId")
        with group_lock(group) as exclusive:
            log(
                phase="record",
                request_id=context.aws_request_id,
                id=body["id"],
                group=group,
                exclusive=exclusive,
                receive_count=int(record["attributes"]["ApproximateReceiveCount"]),
            )
            if not handle_record(record):
                failures.append({"itemIdentifier": record["messageId"]})
        if "response" in body and record["attributes"]["ApproximateReceiveCount"] == "1":
            return body["response"]
    log(phase="end", request_id=context.aws_request_id, failures=len(failures))
    print("a stray print from the handler")  # must not break the protocol
    return {"batchItemFailures": failures}


def scheduled_handler(event: dict[str, Any], context: Any) -> Any:
    """For the schedule's tests: logs the event and the deadline; waits while the file
    ``EMULATOR_HOLD`` names exists."""
    log(
        phase="scheduled",
        request_id=context.aws_request_id,
        remaining_ms=context.get_remaining_time_in_millis(),
        event=event,
    )
    hold = os.environ.get("EMULATOR_HOLD")
    while hold and os.path.exists(hold):
        time.sleep(0.02)
    return {"served": context.aws_request_id}
