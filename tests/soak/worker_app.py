"""The soak's worker: the real SQS worker handler, with kill points and faults at the wire.

A container (``python -m awaken_s3.local.lambda_host``) imports this module once. The handler
is ``handlers.worker.make_handler`` with the soak's model and tools; botocore event hooks on
the shared session kill the process (SIGKILL: no clean-up of any kind) at seeded random
moments around the writes that matter, and fail some checkpoint deletes with a 500:

| point | where |
|---|---|
| ``in_init`` | the handler's entry, before it hid its batch (as the runtime's init, to SQS) |
| ``before_claim`` | the run's claim, after the handler hid its batch |
| ``before_commit`` / ``after_commit`` | around each ``TransactWriteItems`` (commits, tool claims) |
| ``before_delete`` | a checkpoint ``DeleteObject``: between a commit and its delete |
| ``before_put`` / ``after_put`` | around a checkpoint ``PutObject`` |
| ``mid_tool`` | inside a tool, after its claim and before its result |
| ``mid_stream`` | between two model deltas |

``SOAK_KILL_P`` is the probability per occurrence (per point kind, scaled), ``SOAK_SEED``
seeds the choices (with the process id: two containers never die in lockstep), and every kill
is appended to ``SOAK_KILLS_LOG`` first, with the run it hit and the record being worked on.
Every successful claim and every write that let a lease go (a release, a finish, a final
commit) is appended to ``SOAK_LEASES_LOG``: the harness measures each kill to the run's next
claim from them (:func:`tests.soak.harness.recovery_samples`).
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
from tests.fixtures.requests import is_claim, is_release
from tests.soak.model import SoakModel
from tests.soak.script import ADD, LOOKUP
from tests.stores.faults import error_response

KILL_P = float(os.environ.get("SOAK_KILL_P", "0"))
DELETE_FAIL_P = float(os.environ.get("SOAK_DELETE_FAIL_P", "0"))
RNG = random.Random(f"{os.environ.get('SOAK_SEED', '0')}/{os.getpid()}")
KILLS_LOG = os.environ.get("SOAK_KILLS_LOG")
EFFECTS_LOG = os.environ.get("SOAK_EFFECTS_LOG")
LEASES_LOG = os.environ.get("SOAK_LEASES_LOG")
#: relative weight of each kill point (a stream has many deltas, a turn one commit); a death
#: during init is rare next to one during the invocation's work, as in production
WEIGHTS = {
    "in_init": float(os.environ.get("SOAK_INIT_KILL_WEIGHT", "0.1")),
    "before_claim": 1.0,
    "before_commit": 1.0,
    "after_commit": 1.0,
    "before_delete": 2.0,
    "before_put": 0.3,
    "after_put": 0.3,
    "mid_tool": 2.0,
    "mid_stream": 0.05,
}
#: the record this container works on (batch size 1), for the kill and lease logs
CURRENT: dict[str, Any] = {"run_id": None, "message_id": None, "receive_count": 0, "reason": None}
SERVED = {"invocations": 0}


def _append(path: str | None, record: dict[str, Any]) -> None:
    if path is None:
        return
    # O_APPEND writes of one short line are atomic across processes.
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")


def maybe_die(point: str) -> None:
    if KILL_P <= 0 or RNG.random() >= KILL_P * WEIGHTS[point]:
        return
    _append(KILLS_LOG, {"point": point, **CURRENT, "pid": os.getpid(), "at": time.time()})
    os.kill(os.getpid(), signal.SIGKILL)


def _batch_hidden(http_response: Any, **_: Any) -> None:
    """The handler took its batch's visibility in hand: a death from now on is "before the
    claim", not "during init", to the queue."""
    if http_response.status_code == 200:
        _append(LEASES_LOG, {"ev": "hidden", **CURRENT, "pid": os.getpid(), "at": time.time()})


def _lease_write(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """Note what a DynamoDB write does to the lease, for its after-call (same request)."""
    updates = [params, *(item.get("Update", {}) for item in params.get("TransactItems", []))]
    if any(is_claim(update) for update in updates):
        context["soak_lease"] = "claim"
        maybe_die("before_claim")
    elif any(is_release(update) for update in updates):
        context["soak_lease"] = "release"


def _lease_written(
    http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any
) -> None:
    kind = context.get("soak_lease")
    if kind is None or http_response.status_code != 200:
        return
    entry = {"ev": kind, **CURRENT, "pid": os.getpid(), "at": time.time()}
    if kind == "claim":
        attributes = parsed.get("Attributes", {})
        entry["epoch"] = int(attributes["epoch"]["N"])
        entry["previous_lease_until"] = float(
            attributes.get("previous_lease_until", {}).get("N", 0)
        )
    _append(LEASES_LOG, entry)


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
for _operation in ("UpdateItem", "TransactWriteItems"):
    _hooks.register(f"before-parameter-build.dynamodb.{_operation}", _lease_write)
    _hooks.register(f"after-call.dynamodb.{_operation}", _lease_written)
_hooks.register("after-call.sqs.ChangeMessageVisibilityBatch", _batch_hidden)
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
    CURRENT.update(run_id=None, message_id=None, receive_count=0, reason=None)
    # When the handler started, and whether this container served an invocation before (the
    # first one also pays for the lazy imports): what a recovery's start costs apart.
    CURRENT.update(handler_at=time.time(), warm=SERVED["invocations"] > 0)
    SERVED["invocations"] += 1
    if records:
        record = records[0]
        CURRENT["message_id"] = record.get("messageId")
        CURRENT["receive_count"] = int(record["attributes"]["ApproximateReceiveCount"])
        try:
            body = json.loads(record["body"])
            CURRENT["run_id"], CURRENT["reason"] = body["run_id"], body.get("reason", "start")
        except (ValueError, KeyError, TypeError):
            pass
    maybe_die("in_init")
    return _handler(event, context)


def _warm_up() -> None:
    """The first invocation's lazy work, done during the container's init instead.

    The soak runs 20 times faster than the template's defaults, but a Python process does not
    start 20 times faster: a container's first invocation (the run loop's and the SDK's
    imports, opening the clients: 1-2 s on this machine) would count as a 20-40 s cold start
    on Lambda. The event source keeps the soak's containers provisioned (initialized ahead of
    invocations, as Lambda's provisioned concurrency does) and their init does this work.
    """
    import awaken_s3.runtime.loop
    import awaken_s3.service.dispositions
    import awaken_s3.service.instrumented
    import awaken_s3.streaming.runner  # noqa: F401
    from awaken_s3.service.wiring import warm_runtime
    from awaken_s3.settings import StorageSettings

    runtime = warm_runtime()
    runtime.run(runtime.services(StorageSettings.from_env(need_queue=True)))


if os.environ.get("AWAKEN_QUEUE_URL"):
    _warm_up()
