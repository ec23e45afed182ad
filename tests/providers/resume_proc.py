"""A new process that resumes a turn from a checkpoint another process left behind.

``python -m tests.providers.resume_proc CONFIG_JSON`` builds the real adapter for the
dialect pointed at the test's wire server, opens the checkpoint directory with a fresh
:class:`FsStreamCheckpointStore`, runs the turn under a newer lease epoch and prints
the outcome as one JSON line. Nothing is shared with the test process but the
checkpoint files and the wire server's socket.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from awaken_s3.messages import Message
from awaken_s3.stores.fs import FsStreamCheckpointStore
from awaken_s3.streaming.outcome import TurnCompleted, TurnFailed
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.streaming.turn_request import TurnRequest
from tests.providers.helpers import WEATHER
from tests.providers.wire.dialects import by_name


async def main(config: dict[str, Any]) -> dict[str, Any]:
    dialect = by_name(config["dialect"])
    provider = dialect.build(
        config["url"], prefill=config.get("prefill"), extra=config.get("provider_extra")
    )
    request = ModelRequest(
        model=config["model"],
        messages=tuple(Message.model_validate(m) for m in config["messages"]),
        tools=(WEATHER,),
    )
    try:
        with FsStreamCheckpointStore(config["store"]) as store:
            runner = TurnRunner(provider, store, writer_id=f"worker-{config['epoch']}")
            outcome = await runner.run_turn(
                TurnRequest(
                    run_id=config["run_id"],
                    thread_id=config["thread_id"],
                    turn=0,
                    epoch=config["epoch"],
                    request=request,
                )
            )
    finally:
        await provider.aclose()  # type: ignore[attr-defined]
    result: dict[str, Any] = {"kind": outcome.kind, "retry_count": outcome.retry_count}
    if isinstance(outcome, TurnCompleted):
        result.update(
            plan_kind=outcome.plan_kind,
            stop_reason=outcome.stop_reason,
            message=outcome.message.model_dump(mode="json"),
            dropped=[d.id for d in outcome.dropped_tool_calls],
        )
    elif isinstance(outcome, TurnFailed):
        result.update(error=outcome.error.code)
    return result


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))), flush=True)
