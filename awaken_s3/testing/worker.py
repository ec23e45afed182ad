"""The worker a project's tests run: the deployed worker handler, serving the project's app.

Each local container of the harness (:class:`awaken_s3.testing.harness.Harness`) imports this
module, as Lambda imports a deployment's handler. It is
:func:`awaken_s3.service.worker.make_handler` (what ``app.worker_handler()`` returns in the
project's own entry point) over the app ``AWAKEN_TEST_APP`` names, its tools observed
(:mod:`awaken_s3.testing.observe`), with the scripted model the test configured in
``AWAKEN_TEST_DIR`` (read at every invocation) in place of a provider.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from awaken_s3.service.worker import make_handler

if TYPE_CHECKING:
    from awaken_s3.agents import App
    from awaken_s3.streaming.provider import Provider

#: the harness's script for the model: {"calls", "closing", "prefill", "chunk"}
MODEL_FILE: Final = "model.json"


def directory() -> Path:
    return Path(os.environ["AWAKEN_TEST_DIR"])


def app() -> App:
    """The app the test runs (``load_app`` calls this factory at the first invocation)."""
    from awaken_s3.agents import load_app
    from awaken_s3.testing.observe import observed_app

    return observed_app(load_app(os.environ["AWAKEN_TEST_APP"]), directory())


def model_script(folder: Path) -> dict[str, Any]:
    try:
        script: dict[str, Any] = json.loads((folder / MODEL_FILE).read_text())
    except FileNotFoundError:
        return {}
    return script


def scripted() -> Provider:
    from awaken_s3.testing.kills import StreamState, claim_marker, read_plan
    from awaken_s3.testing.model import DEFAULT_CLOSING, ScriptedCall, ToolCallingModel
    from awaken_s3.testing.observe import KILL_WAIT

    folder = directory()
    script = model_script(folder)

    async def at_kill_point(index: int, state: StreamState) -> None:
        if claim_marker(folder, index, state):
            await asyncio.sleep(KILL_WAIT)  # the harness kills this container meanwhile
            raise RuntimeError(f"kill point {index} reached, nobody killed the worker")

    calls = script.get("calls")
    return ToolCallingModel(
        chunk=int(script.get("chunk") or 4),
        closing=script.get("closing") or DEFAULT_CLOSING,
        calls=None if calls is None else [ScriptedCall(c["name"], c["arguments"]) for c in calls],
        prefill=bool(script.get("prefill")),
        kill_points=read_plan(folder),
        on_kill_point=at_kill_point,
    )


lambda_handler = make_handler(app="awaken_s3.testing.worker:app", provider_factory=scripted)
