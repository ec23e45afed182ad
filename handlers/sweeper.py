"""Lambda entry point of the scheduled sweeper (template.yaml: ``handlers.sweeper.lambda_handler``).

Everything it does lives in :mod:`awaken_s3.service.sweeper_job` (Powertools wiring) and
:mod:`awaken_s3.service.sweeper` (the rules); this module only names the handler.
"""

from __future__ import annotations

from awaken_s3.service.sweeper_job import lambda_handler, logger, metrics, run_sweep

__all__ = ["lambda_handler", "logger", "metrics", "run_sweep"]
