"""Lambda entry point of the HTTP API (template.yaml: ``handlers.api.lambda_handler``).

Everything it does lives in :mod:`awaken_s3.service.http` (routes over Powertools' resolver)
and :mod:`awaken_s3.service.runs` (the rules: idempotent creates, ownership, one live run per
thread, the start message); this module only names the handler.
"""

from __future__ import annotations

from awaken_s3.service.http import app, event_problem, lambda_handler, logger, metrics, subject

__all__ = ["app", "event_problem", "lambda_handler", "logger", "metrics", "subject"]
