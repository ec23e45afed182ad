"""Lambda entry point of the SQS worker (template.yaml: ``handlers.worker.lambda_handler``).

Everything it does lives in :mod:`awaken_s3.service.worker`; this module only builds the
handler with the provider the environment configures and no tools of its own.
"""

from __future__ import annotations

from awaken_s3.service.worker import (
    LambdaHandler,
    RecordKept,
    deadline_for,
    is_fifo_event,
    logger,
    make_handler,
    metrics,
    worker_id,
)

lambda_handler: LambdaHandler = make_handler()

__all__ = [
    "RecordKept",
    "deadline_for",
    "is_fifo_event",
    "lambda_handler",
    "logger",
    "make_handler",
    "metrics",
    "worker_id",
]
