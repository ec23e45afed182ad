"""Lambda entry point of the SQS worker (template.yaml: ``handlers.worker.lambda_handler``).

Everything it does lives in :mod:`awaken_s3.service.worker`; this module only builds the
handler for this repository's app: :func:`awaken_s3.agents.default_app`, one agent configured
from the environment, named here by reference so that it is imported at the first invocation
and the module's own import stays light. A project of its own writes
``lambda_handler = app.worker_handler()`` over its own app instead.
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

lambda_handler: LambdaHandler = make_handler(app="awaken_s3.agents:default_app")

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
