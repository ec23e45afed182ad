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
  connection never cancels a run). A connection found gone (410) is forgotten the same way.
* ``$default``: anything else is answered with an ``error`` frame.

A message that cannot be parsed or served gets one ``error`` frame of a fixed code and
sentence (never text from the message); the handler never raises on what a caller sends.
A connection follows at most :data:`~awaken_s3.service.connections.MAX_FOLLOWS` runs.

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
from typing import Any, Final

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.errors import AwakenError
from awaken_s3.ids import InvalidIdError
from awaken_s3.service import runs
from awaken_s3.service.connections import (
    MAX_FOLLOWS,
    Connection,
    ConnectionStore,
    ConnectionStoreError,
    Followed,
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
from awaken_s3.threads.errors import RunNotFound
from awaken_s3.threads.models import RunState

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "awaken-s3")
route_library_logs(logger)

_OK = {"statusCode": 200}


#: bytes of a client message at most (a follow or a cancel is under 300): what is larger is
#: refused before it is parsed
MAX_MESSAGE_BYTES: Final = 4096
#: arrays and objects nested in a message at most (a follow is one flat object): deeper is
#: refused before it is parsed, the same on every Python (3.11's parser raises
#: RecursionError on what 3.13's parses)
MAX_NESTING: Final = 8


class Refused(AwakenError):
    """A message the route cannot serve: answered with an ``error`` frame of ``code``'s
    fixed sentence (``message`` is for logs and tracebacks only, never sent)."""

    def __init__(self, code: str, message: str = "", run_id: str | None = None) -> None:
        super().__init__(message or code)
        self.frame = error_frame(code, run_id)


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
        raise Refused("invalid_message", f"{name} is not a whole number from 0 to {MAX_OFFSET}")
    return value


def _nesting(text: str) -> int:
    """How deep arrays and objects nest in ``text`` (JSON or not), strings skipped."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _json_object(body: Any) -> dict[str, Any]:
    """The message as a JSON object, refused (never raised past) whatever it is: not text,
    not UTF-8, too large, not JSON, nested past the parser's depth, not an object."""
    if not isinstance(body, str):
        raise Refused("invalid_message", "the message is not text")
    try:
        size = len(body.encode("utf-8"))
    except UnicodeEncodeError:
        raise Refused("invalid_message", "the message is not UTF-8") from None
    if size > MAX_MESSAGE_BYTES:
        raise Refused("invalid_message", f"the message is {size} bytes")
    if _nesting(body) > MAX_NESTING:
        raise Refused("invalid_message", "the message nests too deep")
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        raise Refused("invalid_message", "the message is not JSON") from None
    if not isinstance(message, dict):
        raise Refused("invalid_message", "the message is not a JSON object")
    return message


def parse_message(body: Any) -> tuple[str, dict[str, Any]]:
    """The message's public run id and fields; :class:`Refused` for anything else."""
    message = _json_object(body)
    run_id = message.get("run_id")
    if not isinstance(run_id, str):
        raise Refused("invalid_id", "run_id is not a string")
    try:
        return validate_public_run_id(run_id), message
    except InvalidIdError:
        raise Refused("invalid_id", "run_id is not a run id") from None


def start_position(run: RunState, *, after: int | None, turn: int | None) -> Position:
    """Where a follow starts: ``after`` characters of ``turn`` (the run's current one when
    absent); a turn the run has not reached is refused."""
    if turn is None:
        return Position(run.turn, after or 0)
    if turn > run.turn:
        raise Refused("invalid_message", "the run has not reached that turn")
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
    """Post ``frames`` in order (one API Gateway refuses as too large is replaced by its
    ``skipped`` frame); False: the connection is gone."""
    for frame in frames:
        if not await sender.deliver(connection_id, frame):
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

    async def connection(self) -> Connection:
        connection = await self.connections.connection(self.connection_id)
        if connection is None:
            raise Refused("unauthorized", "this connection is not known; connect again")
        return connection

    async def owner(self) -> str:
        return (await self.connection()).owner

    async def owned_run(self, owner: str, public: str) -> RunState:
        try:
            return await runs.owned_run(self.services.threads, owner=owner, public=public)
        except ApiError as exc:
            raise Refused(exc.code, exc.message, public) from exc

    async def gone(self) -> None:
        """The connection went away: it leaves no record (its follows go with it)."""
        await self.connections.forget(self.connection_id)

    async def drop_ended(self, connection: Connection) -> None:
        """At the bound: end the connection's follows of runs that ended since (one told
        nobody, such as a run the sweeper failed, would hold its place until a disconnect)."""
        for run_id in sorted(connection.follows):
            try:
                ended = (await self.services.threads.get_run(run_id)).status.terminal
            except RunNotFound:
                ended = True
            if ended:
                await self.connections.end_follow(run_id, self.connection_id)

    async def follow(self, body: Any) -> None:
        public, message = parse_message(body)
        after, turn = _offset(message, "after"), _offset(message, "turn")
        connection = await self.connection()
        run = await self.owned_run(connection.owner, public)
        at = start_position(run, after=after, turn=turn)
        if not run.status.terminal and len(connection.follows - {run.run_id}) >= MAX_FOLLOWS:
            await self.drop_ended(connection)
            if len((await self.connection()).follows - {run.run_id}) >= MAX_FOLLOWS:
                raise Refused(
                    "too_many_follows", "the connection's follows are at the bound", public
                )
        owed = frames_from(at, await picture_of(self.services, run, public, at.turn))
        following = {"type": "following", "run_id": public, "turn": at.turn, "offset": at.offset}
        if not await _send(self.sender, self.connection_id, [following] + [f for f, _ in owed]):
            await self.gone()
            return
        at = owed[-1][1] if owed else at
        if at.ended:
            return
        followed = await self.connections.follow(
            self.connection_id, run.run_id, at, public_run_id=public
        )
        if followed is Followed.FULL:
            raise Refused("too_many_follows", "the connection's follows are at the bound", public)
        if followed is Followed.GONE:
            return
        # The worker's last look may have come before the record: if the run ended since,
        # the rest is sent from here (a worker that did see the record may send it too).
        again = await self.owned_run(connection.owner, public)
        if again.status.terminal:
            rest = frames_from(at, await picture_of(self.services, again, public, at.turn))
            if await _send(self.sender, self.connection_id, [f for f, _ in rest]):
                await self.connections.end_follow(run.run_id, self.connection_id)
            else:
                await self.gone()

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


async def _lifecycle(routes: SocketRoutes, route: str, event: Mapping[str, Any]) -> dict[str, Any]:
    """``$connect`` and ``$disconnect``; a store that fails refuses the connect (500)."""
    try:
        if route == "$connect":
            sub = principal(event)
            if sub is None:
                return {"statusCode": 401}
            await routes.connections.connect(routes.connection_id, owner=sub)
        else:
            await routes.gone()
    except ConnectionStoreError as exc:
        logger.warning("connection record failed", extra={"route": route, "error": str(exc)})
        return {"statusCode": 500}
    return _OK


async def _message(routes: SocketRoutes, route: str, body: Any) -> None:
    """A client message: served, or answered with one ``error`` frame of a fixed code;
    nothing it holds makes the handler raise."""
    try:
        if route == "follow":
            await routes.follow(body)
        elif route == "cancel":
            await routes.cancel(body)
        else:
            raise Refused("unknown_action", "no such action")
        return
    except Refused as refused:
        frame = refused.frame
    except Exception:  # a failure of ours (a store, the network): a fixed answer, logged
        logger.exception("socket message not served", extra={"route": route})
        frame = error_frame("unavailable")
    try:
        if not await routes.sender.deliver(routes.connection_id, frame):
            await routes.gone()
    except (ClientError, BotoCoreError, ConnectionStoreError) as exc:
        logger.warning("error frame not sent", extra={"error": type(exc).__name__})


async def handle(event: Mapping[str, Any]) -> dict[str, Any]:
    context = _context(event)
    route, connection_id = context.get("routeKey"), context.get("connectionId")
    if not isinstance(connection_id, str) or not isinstance(route, str):
        return {"statusCode": 400}
    storage = StorageSettings.from_env(need_queue=False)
    routes = SocketRoutes(await warm_runtime().services(storage), connection_id)
    if route in ("$connect", "$disconnect"):
        return await _lifecycle(routes, route, event)
    # API Gateway hands a binary WebSocket message over base64-encoded: not a message here.
    body = None if event.get("isBase64Encoded") else event.get("body")
    await _message(routes, route, body)
    return _OK


@logger.inject_lambda_context(clear_state=True, log_event=False)
def _handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return warm_runtime().run(handle(event))


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        result: dict[str, Any] = _handle(event, context)
        return result
