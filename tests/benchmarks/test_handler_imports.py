"""The worker's handler module loads, at its import, only what every container needs then.

Lambda bills a cold start's import, and the worker's is docs/PERFORMANCE.md's cold-start
figure (a few tenths of ``import boto3``). The run loop, the stores, the AWS SDK, pydantic and
pydantic-settings, the provider SDKs and the dev kit load with the first invocation that
needs them. This holds the import to that by the set of modules it loads, in a fresh
interpreter, not by its time: a new module-level import anywhere on that path fails here,
on any machine, however loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the package's modules the import needs: the handler's own, the logger, and the tools'
#: environment it applies
ALLOWED_OWN = {
    "handlers",
    "handlers.worker",
    "awaken_s3",
    "awaken_s3._lazy",
    "awaken_s3.errors",
    "awaken_s3.service",
    "awaken_s3.service.logs",
    "awaken_s3.service.tool_environment",
    "awaken_s3.service.worker",
}
#: third-party packages: Powertools' logger and metrics, and what they import (botocore's
#: package __init__ alone, for Powertools' user-agent patch; no botocore submodule)
ALLOWED_THIRD_PARTY = {"aws_lambda_powertools", "botocore", "jmespath", "typing_extensions"}

_PROBE = """
import json, os, sys
before = set(sys.modules)
try:
    import handlers.worker
    error = None
except Exception as exc:
    error = [type(exc).__module__ + "." + type(exc).__qualname__, str(exc)]
loaded = sorted(set(sys.modules) - before)
print(json.dumps({"loaded": loaded, "error": error, "tickets": os.environ.get("TICKETS_URL")}))
"""


def _import_handler(**env: str) -> dict[str, object]:
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWAKEN_", "POWERTOOLS_")) and name != "TICKETS_URL"
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,  # `python -c` puts it first on the path: this checkout's handlers/
        env={**environment, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _unneeded(loaded: object) -> list[str]:
    assert isinstance(loaded, list)
    out = []
    for name in loaded:
        root = name.split(".")[0]
        if root in ("awaken_s3", "handlers"):
            if name not in ALLOWED_OWN:
                out.append(name)
        elif root in sys.stdlib_module_names or root.startswith("_sysconfigdata"):
            continue
        elif root not in ALLOWED_THIRD_PARTY or (root == "botocore" and name != "botocore"):
            out.append(name)
    return out


def test_the_worker_handler_s_import_loads_nothing_it_does_not_need() -> None:
    result = _import_handler()
    assert result["error"] is None, result["error"]
    unneeded = _unneeded(result["loaded"])
    assert not unneeded, unneeded


def test_the_tools_environment_is_applied_at_import_without_loading_the_settings() -> None:
    result = _import_handler(AWAKEN_TOOL_ENVIRONMENT=json.dumps({"TICKETS_URL": "https://t"}))
    assert result["error"] is None, result["error"]
    assert result["tickets"] == "https://t"
    unneeded = _unneeded(result["loaded"])
    assert not unneeded, unneeded


def test_a_bad_tools_environment_still_fails_the_import_with_the_settings_error() -> None:
    # Lambda reports a failed init: the deployment's mistake shows before any run is taken.
    result = _import_handler(AWAKEN_TOOL_ENVIRONMENT="{oops")
    error = result["error"]
    assert isinstance(error, list)
    assert error[0].endswith(".SettingsError")
    assert "AWAKEN_TOOL_ENVIRONMENT is not JSON" in error[1]
