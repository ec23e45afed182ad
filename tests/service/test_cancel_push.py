"""A cancel on the WebSocket API while a worker streams the run and pushes it to a follower,
through the service's own parts on moto (the socket routes, the worker's run loop with its
pusher, the management API's stand-in): the worker stops at its next checkpoint put, not at a
renewal (none comes during the test), and the follower's frames end with ``run_ended``: no
text frame follows it. The model is paced by the checkpoint (one event per put that
returned, none while the cancel is made), so what follows the cancel is counted in puts, not
seconds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from awaken_s3.messages import Message
from awaken_s3.runtime.loop import RunEnd, RunLoop, RunResult
from awaken_s3.runtime.tools import ToolRegistry
from awaken_s3.service.push import pushing, run_pusher
from awaken_s3.service.socket import SocketRoutes
from awaken_s3.service.wiring import Services
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.fence import CANCEL_WRITER
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads.models import RunSettings, RunStatus
from tests.runtime.scripts import TurnAwareProvider, TurnSpec
from tests.runtime.test_cancel import NEVER, PacedCheckpoints, Watched
from tests.service.conftest import MODEL, SUB, Aws, stored
from tests.service.test_socket import Management, sockets

__all__ = ["sockets"]  # the fixture, used by name

PROMPT = Message.user("tell me")
TEXT = "An answer long enough to be cancelled while a follower reads it. " * 8


@dataclass
class Gates:
    """What paces the model: some text pushed, then the cancel being made and accepted."""

    pushed_text: asyncio.Event = field(default_factory=asyncio.Event)
    cancelling: asyncio.Event = field(default_factory=asyncio.Event)
    accepted: asyncio.Event = field(default_factory=asyncio.Event)


async def followed_worker(
    services: Services, run_id: str, gates: Gates
) -> tuple[Callable[[], Coroutine[Any, Any, RunResult]], Watched]:
    """The worker as the service wires it (its pusher, the pushing store and writer), over a
    model paced by the checkpoint: one event per put that returned, none while the cancel is
    made (its read and put fit between two of the worker's puts, as between real ones)."""
    pusher = run_pusher(services, run_id)
    assert pusher is not None
    checkpoints = PacedCheckpoints(pusher.store(services.checkpoints))

    async def pause(turn: int, index: int) -> None:
        if index >= 4:
            seen = checkpoints.finished
            await gates.pushed_text.wait()
            if gates.cancelling.is_set():
                await gates.accepted.wait()
            await checkpoints.after(seen)

    model = Watched(TurnAwareProvider([TurnSpec(TEXT)], pause=pause))
    runner = TurnRunner(
        model,
        checkpoints,
        writer_id="w1",
        checkpoint_policy=CheckpointPolicy(min_interval=0.0, min_bytes=1),
        writer_factory=pusher.writer_factory,
    )
    loop = RunLoop(
        services.threads,
        pusher.runner(runner),
        services.checkpoints,
        ToolRegistry(),
        worker_id="w1",
        renew_every=NEVER,
        listener=pusher,
    )

    async def work() -> RunResult:
        async with pushing(pusher):
            result = await loop.run(run_id)
            pusher.run_returned(result)
        return result

    return work, model


async def cancel_while_followed(services: Services, management: Management) -> dict[str, Any]:
    run_id = stored("r1")
    await services.threads.create_thread(stored("t1"), owner=SUB)
    await services.threads.create_run(
        run_id,
        thread_id=stored("t1"),
        owner=SUB,
        settings=RunSettings(model=MODEL),
        messages=[PROMPT],
    )
    gates = Gates()
    work, model = await followed_worker(services, run_id, gates)
    routes = SocketRoutes(services, "c1=")
    await routes.connections.connect("c1=", owner=SUB)
    worker = asyncio.create_task(work())
    async with asyncio.timeout(60):  # a bound only a hung test reaches
        await routes.follow(json.dumps({"action": "follow", "run_id": "r1"}))
        while "text" not in management.kinds("c1="):
            gates.pushed_text.set()  # the worker's first puts land, and its pusher finds us
            await asyncio.sleep(0.01)
        gates.cancelling.set()
        await routes.cancel(json.dumps({"action": "cancel", "run_id": "r1"}))
        read_at_cancel = model.read
        gates.accepted.set()
        result = await worker
        await model.closed.wait()
    run = await services.threads.get_run(run_id)
    return {
        "end": result.end,
        "status": run.status,
        "after_cancel": model.read - read_at_cancel,
        "read": model.read,
        "messages": await services.threads.load_messages(stored("t1")),
    }


def test_a_cancel_stops_the_worker_and_no_text_frame_follows_run_ended(
    aws: Aws, sockets: Management
) -> None:
    seen = aws.run(lambda services: cancel_while_followed(services, sockets))
    assert (seen["end"], seen["status"]) == (RunEnd.CANCELLED, RunStatus.CANCELLED)
    assert seen["after_cancel"] <= 2, "events the worker read after the cancel"
    assert seen["read"] < len(TEXT) // 4, "the turn was not streamed to its end"
    assert seen["messages"] == [PROMPT], "a cancelled turn commits nothing"
    kinds = sockets.kinds("c1=")
    assert kinds[0] == "following" and "text" in kinds
    # The follower was told the end once the worker stopped, and nothing after it.
    ended = kinds.index("run_ended")
    assert kinds[ended + 1 :] == [], kinds[ended:]
    assert sockets.frames["c1="][ended]["status"] == "cancelled"
    # The answer to the cancel went to the connection that sent it, before the end.
    assert "cancel" in kinds[:ended]


def test_a_worker_that_dies_after_the_cancel_leaves_the_end_to_the_record_s_next_delivery(
    aws: Aws, sockets: Management
) -> None:
    """The cancel finds a live lease (its holder is dead, but its lease has not run out): the
    handler leaves the end to the worker, and no worker tells it. The record the dead worker
    held comes back, the next invocation finds the run ended, tells the follower, and deletes
    the checkpoint the cancel marked (stale: its run ended)."""
    from awaken_s3.demo.model import ContinuingModel
    from awaken_s3.service.worker import make_handler
    from tests.service.test_socket import invoke
    from tests.service.test_worker import call_api, deliver, start_run

    start_run("run-1")

    async def hold(services: Services) -> None:
        await services.threads.claim_run(stored("run-1"), worker="dead", lease_seconds=300)

    aws.run(hold)
    invoke("$connect", "c1=")
    invoke("follow", "c1=", run_id="run-1")
    assert call_api("POST", "/runs/run-1/cancel")["status"] == "cancelled"
    assert sockets.kinds("c1=") == ["following"], "a live worker's to tell, not the handler's"

    async def checkpoint(services: Services) -> Any:
        return await services.checkpoints.get(stored("run-1"))

    marked = aws.run(checkpoint)
    assert marked is not None and marked.checkpoint.writer == CANCEL_WRITER
    assert marked.checkpoint.partial_text == ""

    response, _ = deliver(aws, make_handler(provider_factory=lambda: ContinuingModel()))
    assert response == {"batchItemFailures": []}
    assert sockets.kinds("c1=") == ["following", "run_ended"]
    assert sockets.frames["c1="][-1]["status"] == "cancelled"
    assert aws.run(checkpoint) is None
