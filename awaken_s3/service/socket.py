"""The WebSocket API's routes (API Gateway WebSocket, Lambda proxy integration).

* ``$connect`` (behind the REQUEST authorizer, :mod:`awaken_s3.service.socket_auth`): the
  connection is recorded with its owner, the token's ``sub``.
* ``follow`` ``{"action": "follow", "run_id", "after"?, "turn"?}``: the caller's own run only
  (ids are scoped per caller, as on the HTTP API). The follower is sent what it missed, from
  the thread and the checkpoint, starting at ``after`` characters of the run's current turn
  (or of ``turn``, a turn it was in; absent: the start of the run's first uncommitted turn),
  then recorded at the position it was brought to; the worker serves it from there.
* ``cancel`` ``{"action": "cancel", "run_id"}``: the run is cancelled; a streaming worker
  learns it from its checkpoint's next conditional put (the cancel marks the checkpoint),
  stops, and tells the followers itself (last text, then the end); a run no live worker
  drives has its followers told here.
* ``$disconnect``: the connection and its follows are forgotten; nothing else (a dropped
  connection never cancels a run).
* ``$default``: anything else is answered with an ``error`` frame.

Frames go back through the management API (``PostToConnection``). A follow recorded while
the run ended could be missed by the worker's last look, so the handler looks at the run
once more after recording and, if it ended, sends the rest itself: a frame may then come
twice, never not at all.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.errors import AwakenError
from awaken_s3.ids import InvalidIdError
from awaken_s3.service import runs
from awaken_s3.service.connections import (
    ConnectionStore,
    ConnectionStoreError,
    connections_table,
)
from awaken_s3.service.frames import Frame, Position, RunPicture, error_frame, frames_from
from awaken_s3.service.logs import route_library_logs
from awaken_s3.service.partial import MAX_OFFSET, read_partial
from awaken_s3.service.push import FrameSender, durable_calls
from awaken_s3.service.runs import ApiError
from awaken_s3.service.scoping import validate_public_run_id
from awaken_s3.service.wiring import Services, warm_runtime
from awaken_s3.settings import StorageSettings
from awaken_s3.threads.models import RunState

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "awaken-s3")
route_library_logs(logger)

_OK = {"statusCode": 200}


class Refused(AwakenError):
    """A message the route cannot serve: answered with an ``error`` frame."""

    def __init__(self, code: str, message: str, run_id: str | None = None) -> None:
        super().__init__(message)
        self.frame = error_frame(code, message, run_id)


def _context(event: Mapping[str, Any]) -> Mapping[str, Any]:
    context = event.get("requestContext")
    return context if isinstance(context, Mapping) else {}


def principal(event: Mapping[str, Any]) -> str | None:
    """The ``sub`` the ``$connect`` authorizer allowed, or None."""
    authorizer = _context(event).get("authorizer")
    if not isinstance(authorizer, Mapping):
        return None
    sub = authorizer.get("sub") or authorizer.get("principalId")
    return sub if isinstance(sub, str) and sub else None


def _offset(message: Mapping[str, Any], name: str) -> int | None:
    value = message.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OFFSET:
        raise Refused("invalid_message", f"{name} must be a whole number from 0 to {MAX_OFFSET}")
    return value


def parse_message(body: Any) -> tuple[str, dict[str, Any]]:
    """The message's public run id and fields; :class:`Refused` for anything else."""
    try:
        message = json.loads(body) if isinstance(body, str) else None
    except ValueError:
        message = None
    if not isinstance(message, dict):
        raise Refused("invalid_message", "a message is a JSON object with an action")
    try:
        run_id = validate_public_run_id(str(message.get("run_id") or ""))
    except InvalidIdError as exc:
        raise Refused("invalid_id", str(exc)) from exc
    return run_id, message


def start_position(run: RunState, *, after: int | None, turn: int | None) -> Position:
    """Where a follow starts: ``after`` characters of ``turn`` (the run's current one when
    absent); a turn the run has not reached is refused."""
    if turn is None:
        return Position(run.turn, after or 0)
    if turn > run.turn:
        raise Refused("invalid_message", f"the run is at turn {run.turn}, not {turn}")
    return Position(turn, after or 0)


async def picture_of(services: Services, run: RunState, public: str, since: int) -> RunPicture:
    """What is durable of ``run`` for a follower in turn ``since``: the committed turns from
    there (the thread), the current turn's checkpointed text (the checkpoint), the end."""
    from awaken_s3.service.frames import durable_text, run_turns
    from awaken_s3.service.public_errors import public_error

    committed = {}
    if since < run.turn:
        committed = run_turns(run, await services.threads.load_messages(run.thread_id))
    read = await read_partial(services.checkpoints, run)
    checkpoint = read.stored.checkpoint if read.stored is not None else None
    ended = run.status.value if run.status.terminal else None
    return RunPicture(
        run_id=public,
        turn=run.turn,
        committed=committed,
        text=durable_text(checkpoint.partial_text) if checkpoint else "",
        calls=durable_calls(checkpoint) if checkpoint else (),
        ended=ended,
        error=public_error(run.error) if ended and run.error else None,
    )


async def _send(sender: FrameSender, connection_id: str, frames: list[Frame]) -> bool:
    for frame in frames:
        if not await sender.send(connection_id, frame):
            return False
    return True


class SocketRoutes:
    def __init__(self, services: Services, connection_id: str) -> None:
        table = connections_table()
        if table is None or services.management is None:
            raise RuntimeError("AWAKEN_CONNECTIONS_TABLE and the management API are not set")
        self.services = services
        self.connection_id = connection_id
        self.connections = ConnectionStore(table, services.dynamodb)
        self.sender = FrameSender(services.management)

    async def owner(self) -> str:
        connection = await self.connections.connection(self.connection_id)
        if connection is None:
            raise Refused("unauthorized", "this connection is not known; connect again")
        return connection.owner

    async def owned_run(self, owner: str, public: str) -> RunState:
        try:
            return await runs.owned_run(self.services.threads, owner=owner, public=public)
        except ApiError as exc:
            raise Refused(exc.code, exc.message, public) from exc

    async def follow(self, body: Any) -> None:
        public, message = parse_message(body)
        after, turn = _offset(message, "after"), _offset(message, "turn")
        owner = await self.owner()
        run = await self.owned_run(owner, public)
        at = start_position(run, after=after, turn=turn)
        owed = frames_from(at, await picture_of(self.services, run, public, at.turn))
        following = {"type": "following", "run_id": public, "turn": at.turn, "offset": at.offset}
        if not await _send(self.sender, self.connection_id, [following] + [f for f, _ in owed]):
            return
        at = owed[-1][1] if owed else at
        if at.ended:
            return
        await self.connections.follow(self.connection_id, run.run_id, at, public_run_id=public)
        # The worker's last look may have come before the record: if the run ended since,
        # the rest is sent from here (a worker that did see the record may send it too).
        again = await self.owned_run(owner, public)
        if again.status.terminal:
            rest = frames_from(at, await picture_of(self.services, again, public, at.turn))
            await _send(self.sender, self.connection_id, [f for f, _ in rest])

    async def cancel(self, body: Any) -> None:
        public, _ = parse_message(body)
        owner = await self.owner()
        try:
            done = await runs.cancel_run(
                self.services.threads,
                owner=owner,
                public=public,
                checkpoints=self.services.checkpoints,
                signal=cancel_signal(),
            )
        except ApiError as exc:
            raise Refused(exc.code, exc.message, public) from exc
        run = done.run
        logger.info("run cancel requested", extra={"run_id": run.run_id})
        answer = {"type": "cancel", "run_id": public, "status": run.status.value}
        await self.sender.send(self.connection_id, answer)
        if done.caller_tells:
            await tell_followers(self.services, run, public)


def cancel_signal() -> bool:
    """Whether a cancel marks the run's checkpoint for the worker (``AWAKEN_CANCEL_SIGNAL``;
    off only to measure the renewal alone)."""
    from awaken_s3.service.config import ApiSettings

    return ApiSettings.from_env(os.environ).cancel_signal


async def cancel_and_tell(services: Services, *, owner: str, public: str) -> RunState:
    """The HTTP route's cancel: the run cancelled (and its worker signalled), and its
    followers told here when no live worker drives the run (:attr:`runs.Cancel.caller_tells`)."""
    done = await runs.cancel_run(
        services.threads,
        owner=owner,
        public=public,
        checkpoints=services.checkpoints,
        signal=cancel_signal(),
    )
    if done.caller_tells:
        await tell_followers(services, done.run, public)
    return done.run


async def tell_followers(services: Services, run: RunState, public: str) -> None:
    """Send every follower of an ended ``run`` what it is owed up to the end. Called only
    by a cancel that ended a run no live worker drives (a queued or handed-over run, a lease
    run out): while one does, it alone sends the run's frames, its last text and then
    ``run_ended``, so no frame can follow the end; a run that had ended before is told by
    whoever ended it. Duplicates of frames a follower has (a redelivery that
    tells again) are skipped by offset on the client."""
    table = connections_table()
    if table is None or services.management is None or not run.status.terminal:
        return
    connections = ConnectionStore(table, services.dynamodb)
    sender = FrameSender(services.management)
    try:
        for follower in await connections.followers(run.run_id):
            picture = await picture_of(services, run, follower.run_id, follower.position.turn)
            frames = [frame for frame, _ in frames_from(follower.position, picture)]
            if not await _send(sender, follower.connection_id, frames):
                await connections.unfollow(run.run_id, follower.connection_id)
                await connections.forget(follower.connection_id)
    except (ConnectionStoreError, ClientError, BotoCoreError) as exc:
        # The cancel stands; a follower re-following is told the run ended.
        logger.warning("followers not told of the end", extra={"error": type(exc).__name__})


async def handle(event: Mapping[str, Any]) -> dict[str, Any]:
    context = _context(event)
    route, connection_id = context.get("routeKey"), context.get("connectionId")
    if not isinstance(connection_id, str) or not isinstance(route, str):
        return {"statusCode": 400}
    storage = StorageSettings.from_env(need_queue=False)
    routes = SocketRoutes(await warm_runtime().services(storage), connection_id)
    if route == "$connect":
        sub = principal(event)
        if sub is None:
            return {"statusCode": 401}
        await routes.connections.connect(connection_id, owner=sub)
        return _OK
    if route == "$disconnect":
        await routes.connections.forget(connection_id)
        return _OK
    try:
        if route == "follow":
            await routes.follow(event.get("body"))
        elif route == "cancel":
            await routes.cancel(event.get("body"))
        else:
            raise Refused("unknown_action", 'send {"action": "follow" | "cancel", "run_id": ...}')
    except Refused as refused:
        await routes.sender.send(connection_id, refused.frame)
    return _OK


@logger.inject_lambda_context(clear_state=True, log_event=False)
def _handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return warm_runtime().run(handle(event))


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        result: dict[str, Any] = _handle(event, context)
        return result
