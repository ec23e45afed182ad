"""The real worker handler with a scripted model, as a container imports it."""

from __future__ import annotations

from awaken_s3.demo.model import ContinuingModel
from awaken_s3.service.worker import make_handler

lambda_handler = make_handler(provider_factory=lambda: ContinuingModel(chunk=40, delay=0.0))
