"""The demo's worker function: the real SQS worker handler with the demo's scripted model.

The demo's event-source emulator imports this in each worker container
(``awaken_s3.demo.lambda_app:lambda_handler``), as Lambda would import a deployment's handler.
"""

from __future__ import annotations

from awaken_s3.demo.model import ContinuingModel
from awaken_s3.service.worker import make_handler

lambda_handler = make_handler(provider_factory=ContinuingModel)
