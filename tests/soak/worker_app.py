"""The soak's worker: the real SQS worker handler, with kill points and faults at the wire.

A container (``python -m awaken_s3.local.lambda_host``) imports this module once. The handler
is ``handlers.worker.make_handler`` with the soak's model and tools; botocore event hooks on
the shared session kill the process (SIGKILL: no clean-up of any kind) at seeded random
moments around the writes that matter, and fail some checkpoint deletes with a 500:

| point | where |
|---|---|
| ``before_commit`` / ``after_commit`` | around each ``TransactWriteItems`` (commits, tool claims) |
| ``before_delete`` | a checkpoint ``DeleteObject``: between a commit and its delete |
| ``before_put`` / ``after_put`` | around a checkpoint ``PutObject`` |
| ``mid_tool`` | inside a tool, after its claim and before its result |
| ``mid_stream`` | between two model deltas |

``SOAK_KILL_P`` is the probability per occurrence (per point kind, scaled), ``SOAK_SEED``
seeds the choices (with the process id: two containers never die in lockstep), and every kill
is appended to ``SOAK_KILLS_LOG`` first, with the run it hit.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from awaken_s3.runtime.tools import Tool, ToolRegistry
from awaken_s3.service.wiring import shared_session
from awaken_s3.streaming.provider import ModelRequest
from handlers.worker import make_handler
from tests.soak.model import SoakModel
from tests.soak.script import ADD, LOOKUP
from tests.stores.faults import error_response

KILL_P = float(os.environ.get("SOAK_KILL_P", "0"))
DELETE_FAIL_P = float(os.environ.get("SOAK_DELETE_FAIL_P", "0"))
RNG = random.Random(f"{os.environ.get('SOAK_SEED', '0')}/{os.getpid()}")
KILLS_LOG = os.environ.get("SOAK_KILLS_LOG")
EFFECTS_LOG = os.environ.get("SOAK_EFFECTS_LOG")
#: relative weight of each kill point (a stream has many deltas, a turn one commit)
WEIGHTS = {
    "before_commit": 1.0,
    "after_commit": 1.0,
    "before_delete": 2.0,
    "before_put": 0.3,
    "after_put": 0.3,
    "mid_tool": 2.0,
    "mid_stream": 0.05,
}
CURRENT_RUN: dict[str, str | None] = {"run_id": None}


def _append(path: str | None, record: dict[str, Any]) -> None:
    if path is None:
        return
    # O_APPEND writes of one short line are atomic across processes.
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")


def maybe_die(point: str) -> None:
    if KILL_P <= 0 or RNG.random() >= KILL_P * WEIGHTS[point]:
        return
    _append(
        KILLS_LOG,
        {"point": point, "run_id": CURRENT_RUN["run_id"], "pid": os.getpid(), "at": time.time()},
    )
    os.kill(os.getpid(), signal.SIGKILL)


def _before_call(event_name: str, **_: Any) -> None:
    operation = event_name.rsplit(".", 1)[-1]
    if operation == "TransactWriteItems":
        maybe_die("before_commit")
    elif operation == "DeleteObject":
        maybe_die("before_delete")
    elif operation == "PutObject":
        maybe_die("before_put")


def _after_call(event_name: str, **_: Any) -> None:
    operation = event_name.rsplit(".", 1)[-1]
    if operation == "TransactWriteItems":
        maybe_die("after_commit")
    elif operation == "PutObject":
        maybe_die("after_put")


def _fail_some_deletes(request: Any, **_: Any) -> Any:
    if DELETE_FAIL_P > 0 and RNG.random() < DELETE_FAIL_P:
        return error_response(request.url, 500, "InternalError", "injected by the soak")
    return None


_hooks = shared_session()._session
_hooks.register("before-call.dynamodb.TransactWriteItems", _before_call)
_hooks.register("after-call.dynamodb.TransactWriteItems", _after_call)
_hooks.register("before-call.s3.DeleteObject", _before_call)
_hooks.register("before-call.s3.PutObject", _before_call)
_hooks.register("after-call.s3.PutObject", _after_call)
_hooks.register("before-send.s3.DeleteObject", _fail_some_deletes)


class KillingModel(SoakModel):
    async def _events(self, request: ModelRequest) -> Any:
        async for event in super()._events(request):
            maybe_die("mid_stream")
            yield event


def _effect(call_key: str) -> None:
    _append(EFFECTS_LOG, {"call": call_key, "pid": os.getpid(), "at": time.time()})


def add(a: int, b: int) -> str:
    _effect(f"add:{a}:{b}")
    maybe_die("mid_tool")
    return str(a + b)


def lookup(key: str) -> str:
    _effect(f"lookup:{key}")
    maybe_die("mid_tool")
    return f"value of {key}"


TOOLS = ToolRegistry(
    [
        Tool(
            ADD,
            "Add two integers (a side effect: runs at most once).",
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
            add,
        ),
        Tool(
            LOOKUP,
            "Look a key up (idempotent: may run again after a crash).",
            {
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
                "additionalProperties": False,
            },
            lookup,
            idempotent=True,
        ),
    ]
)

_handler = make_handler(tools=TOOLS, provider_factory=KillingModel)


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records") or []
    try:
        CURRENT_RUN["run_id"] = json.loads(records[0]["body"])["run_id"] if records else None
    except (ValueError, KeyError, TypeError):
        CURRENT_RUN["run_id"] = None
    return _handler(event, context)
