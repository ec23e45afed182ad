"""Route the library's standard-library logs through a handler's Powertools logger."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import utils as logging_utils

LIBRARY_LOGGER = "awaken_s3"


def in_lambda(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("AWS_LAMBDA_FUNCTION_NAME"))


def route_library_logs(logger: Logger, *, env: Mapping[str, str] | None = None) -> bool:
    """Give ``awaken_s3.*`` records the handler's JSON format (and Lambda context).

    Only inside Lambda: Powertools does it by replacing the library logger's handlers and
    turning off propagation, which would hide the records from any other logging setup in
    the same process (a test runner, a local server embedding the handlers).
    """
    if not in_lambda(env):
        return False
    logging.getLogger(LIBRARY_LOGGER)  # the parent must exist as a logger to be configured
    logging_utils.copy_config_to_registered_loggers(source_logger=logger, include={LIBRARY_LOGGER})
    return True
