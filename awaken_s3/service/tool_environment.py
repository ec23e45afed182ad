"""The tools' own environment variables, from one deployment setting.

A project's tools read their settings (an endpoint, a table name, the ARN of their secret)
from the environment, as anywhere else. CloudFormation has no map-typed parameters, so the
template takes them as one JSON object (the ``ToolEnvironment`` parameter) in
``AWAKEN_TOOL_ENVIRONMENT``; the worker's handler sets each variable in its process
environment when it is built (:func:`awaken_s3.service.worker.make_handler`), before its first
run. A tool reads them when it runs (``os.environ["TICKETS_URL"]``), not at import: the app's
module is imported before its handler is built.

The names the platform and awaken-s3 own are refused (``AWS_*``, ``LAMBDA_*``, ``AWAKEN_*``,
``POWERTOOLS_*``, a leading underscore), and so is a name the function's own configuration
already sets to another value: a tool's setting never silently changes the service's.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import MutableMapping
from typing import Final

# Not awaken_s3.settings: this runs at the worker handler's import, which must not load
# pydantic-settings (its cold start, docs/PERFORMANCE.md).
from awaken_s3.errors import SettingsError

VARIABLE: Final = "AWAKEN_TOOL_ENVIRONMENT"
RESERVED_PREFIXES: Final = ("AWS_", "LAMBDA_", "AWAKEN_", "POWERTOOLS_", "_")
_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_tool_environment(text: str) -> dict[str, str]:
    """The variables ``text`` (a JSON object of strings) sets (pure); SettingsError names
    what is wrong."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SettingsError(f"{VARIABLE} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise SettingsError(f"{VARIABLE} must be a JSON object of strings, not {text[:40]!r}")
    for name, item in value.items():
        if not _NAME.match(name):
            raise SettingsError(f"{VARIABLE}: {name!r} is not an environment variable name")
        if name.upper().startswith(RESERVED_PREFIXES):
            raise SettingsError(
                f"{VARIABLE}: {name} is reserved (names starting with "
                f"{', '.join(RESERVED_PREFIXES)} belong to Lambda and awaken-s3)"
            )
        if not isinstance(item, str):
            raise SettingsError(f"{VARIABLE}: the value of {name} must be a string")
    return dict(value)


def apply_tool_environment(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set the tools' variables in ``environ`` (the process's); the variables set."""
    target = os.environ if environ is None else environ
    wanted = parse_tool_environment(target.get(VARIABLE, ""))
    for name, value in wanted.items():
        if name in target and target[name] != value:
            raise SettingsError(
                f"{VARIABLE}: {name} is already set by the function's configuration"
            )
    target.update(wanted)
    return wanted
