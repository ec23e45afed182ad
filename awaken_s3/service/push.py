"""The worker's live pushes: a run's durable progress, to every connection following it.

What a follower is sent is never taken back, so only durable text is pushed: text a
checkpoint put landed with, or the committed turn. Text the model streamed after the last
put would die with this worker, and the worker that resumes continues from the checkpoint,
where the model may write something else. While a run has followers its checkpoints follow
the push cadence instead (:meth:`RunPusher.checkpoint_interval`: a put every
``interval`` seconds instead of every second, at most one in flight, coalesced, as always), so
a follower sees text about ``interval`` plus one S3 put after the model sent it. A run nobody
follows costs one consistent ``Query`` of its followers every ``discover_every`` seconds.

:class:`RunPusher` gets told, synchronously and without ever blocking the stream, what became
durable (:class:`PushingCheckpointStore` around the runner's checkpoint store reports every put
that landed; :class:`PushingRunner` reports the turn's start and its resumes from the runner's
turn events; the run loop reports each commit). One background task looks for followers and
sends each what it is owed (:func:`awaken_s3.service.frames.frames_from`): at most one batch in
flight, batches at least ``gap`` apart. A follower it has not served yet (a new follow,
or every follower after a crash) is sent from where its record says it stood, so a crash
leaves no gap: at worst a resumed worker repeats characters a client has, which it skips by
offset. A connection that is gone is forgotten (it leaves no record); a follower told the
run ended stops following it. Every frame fits one WebSocket frame
(:data:`awaken_s3.service.frames.MAX_FRAME_BYTES`); one API Gateway still refuses as too
large (413) is never posted again: a ``skipped`` frame takes its place, and the frames after
it (the turn's commit, the run's end) still go.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.messages import Message, ToolUseBlock
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.service.connections import (
    ConnectionStore,
    ConnectionStoreError,
    connections_table,
)
from awaken_s3.service.frames import (
    MAX_FRAME_BYTES,
    Frame,
    Position,
    RunPicture,
    durable_text,
    encode_frame,
    frames_from,
    resumed_frame,
    run_turns,
    skipped_frame,
)
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.coalescer import (
    CheckpointWriter,
    CoalescingCheckpointWriter,
    WriterContext,
)
from awaken_s3.streaming.outcome import TurnOutcome
from awaken_s3.streaming.recovery import parse_tool_call
from awaken_s3.streaming.turn_events import TurnEvent, TurnResumed
from awaken_s3.streaming.turn_request import TurnRequest
from awaken_s3.threads.base import RunStore
from awaken_s3.threads.errors import ThreadStoreError
from awaken_s3.threads.models import RunState

if TYPE_CHECKING:
    from awaken_s3.runtime.loop import RunResult
    from awaken_s3.service.wiring import Services

log = logging.getLogger("awaken_s3.push")

#: seconds between a followed run's checkpoint puts: what it pushes became durable by them
PUSH_INTERVAL: Final = 0.1
#: push batches start at least this long apart (a batch coalesces what landed meanwhile)
PUSH_GAP: Final = 0.05
#: seconds between two looks for new followers
DISCOVER_EVERY: Final = 0.5
#: upper bound on the last look and push when the invocation ends
FINAL_PUSH_TIMEOUT: Final = 5.0


class Delivery(enum.Enum):
    """What became of one frame posted to one connection."""

    SENT = "sent"
    #: the connection is gone (410, or 403 for one API Gateway no longer knows)
    GONE = "gone"
    #: API Gateway will never carry this frame (413, or over the frame size before posting):
    #: never posted again as it is
    TOO_LARGE = "too_large"


class FrameSender:
    """Frames to connections through API Gateway's management API (``PostToConnection``),
    with a client whose endpoint botocore takes from its own settings
    (``AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI``)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.frames = 0
        self.bytes = 0
        self.refused = 0
        #: frames API Gateway refused as too large (connection, encoded frame): never posted
        #: again, even when what replaces them could not be sent and the batch is retried
        self._too_large: set[tuple[str, bytes]] = set()

    async def send(self, connection_id: str, frame: Frame) -> Delivery:
        """Post one frame. Raises (botocore's errors) only on what may pass: throttling, a
        server error, the network."""
        data = encode_frame(frame)
        if len(data) > MAX_FRAME_BYTES or (connection_id, data) in self._too_large:
            self.refused += 1
            return Delivery.TOO_LARGE
        try:
            await self.client.post_to_connection(ConnectionId=connection_id, Data=data)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("GoneException", "ForbiddenException"):
                return Delivery.GONE
            if code == "PayloadTooLargeException":
                self.refused += 1
                self._too_large.add((connection_id, data))
                return Delivery.TOO_LARGE
            raise
        self.frames += 1
        self.bytes += len(data)
        return Delivery.SENT

    async def deliver(self, connection_id: str, frame: Frame) -> bool:
        """Post ``frame``, or in its place the small ``skipped`` frame when API Gateway will
        never carry it (so later frames still go: a turn's end, the run's end). False: the
        connection is gone."""
        delivery = await self.send(connection_id, frame)
        if delivery is Delivery.TOO_LARGE:
            log.warning(
                "a %s frame of %d bytes was refused as too large: skipped",
                frame.get("type"),
                len(encode_frame(frame)),
            )
            delivery = await self.send(connection_id, skipped_frame(frame))
        return delivery is not Delivery.GONE


def durable_calls(checkpoint: StreamCheckpoint) -> tuple[ToolUseBlock, ...]:
    """The complete tool calls of a checkpoint, in stream order, up to the first one still
    streaming (a later call is never announced before an earlier one)."""
    calls: list[ToolUseBlock] = []
    for call in sorted(checkpoint.tool_calls, key=lambda c: c.index):
        decided = parse_tool_call(call)
        if not isinstance(decided, ToolUseBlock):
            break
        calls.append(decided)
    return tuple(calls)


@dataclass
class _Follower:
    connection_id: str
    run_id: str
    position: Position
    #: the position last recorded in the table (a crash re-sends from there)
    recorded: Position
    outbox: list[Frame] = field(default_factory=list)


class RunPusher:
    def __init__(
        self,
        run_id: str,
        *,
        connections: ConnectionStore,
        sender: FrameSender,
        threads: RunStore,
        interval: float = PUSH_INTERVAL,
        gap: float = PUSH_GAP,
        discover_every: float = DISCOVER_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run_id = run_id
        self.connections = connections
        self.sender = sender
        self.threads = threads
        self.interval = interval
        self.gap = gap
        self.discover_every = discover_every
        self._clock = clock
        self._followers: dict[str, _Follower] = {}
        self._turn: int | None = None
        self._text = ""
        self._calls: tuple[ToolUseBlock, ...] = ()
        self._committed: dict[int, Message] = {}
        self._ended: tuple[str, Any] | None = None
        self._dirty = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.batches = 0

    # -- what became durable (synchronous: called from the stream's path, never blocks)

    def turn_started(self, turn: int) -> None:
        if turn != self._turn:
            self._turn, self._text, self._calls = turn, "", ()

    def durable(self, checkpoint: StreamCheckpoint) -> None:
        """A checkpoint put landed: its text and complete tool calls can be shown."""
        if checkpoint.run_id != self.run_id or checkpoint.turn != self._turn:
            return
        text, calls = durable_text(checkpoint.partial_text), durable_calls(checkpoint)
        if len(text) > len(self._text) or len(calls) > len(self._calls):
            self._text, self._calls = (
                max(text, self._text, key=len),
                max(calls, self._calls, key=len),
            )
            self._touch()

    def observe(self, event: TurnEvent) -> None:
        """The runner's turn events: a resume is announced (its text comes from checkpoints)."""
        if isinstance(event, TurnResumed) and self._turn is not None:
            for follower in self._followers.values():
                follower.outbox.append(
                    resumed_frame(follower.run_id, self._turn, event.plan, event.retry_count)
                )
            self._touch()

    def turn_committed(self, run: RunState, message: Message) -> None:
        self._committed[run.turn - 1] = message
        self._turn, self._text, self._calls = run.turn, "", ()
        self._touch()

    def ended(self, status: str, error: Any = None) -> None:
        self._ended = (status, error)
        self._touch()

    def run_returned(self, result: RunResult) -> None:
        """The loop returned: an ended run's followers are told so."""
        from awaken_s3.service.public_errors import public_error

        run = result.run
        if run is not None and run.status.terminal:
            self.ended(run.status.value, public_error(run.error) if run.error else None)

    def checkpoint_interval(self) -> float | None:
        """The checkpoint cadence this run needs now (None: the writer's own)."""
        return self.interval if self._followers else None

    # -- what the worker wires in

    def store(self, inner: StreamCheckpointStore) -> PushingCheckpointStore:
        return PushingCheckpointStore(inner, self)

    def runner(self, inner: Any) -> PushingRunner:
        return PushingRunner(inner, self)

    def writer_factory(self, ctx: WriterContext) -> CheckpointWriter:
        """The coalescing writer, at the push cadence while the run has followers."""
        return CoalescingCheckpointWriter(replace(ctx, interval=self.checkpoint_interval))

    def _touch(self) -> None:
        self._dirty = True
        self._wake.set()

    # -- the background task

    async def __aenter__(self) -> RunPusher:
        self._task = asyncio.create_task(self._run(), name=f"push-{self.run_id}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the task, then one last look and push, bounded (a follow recorded while the
        run ended is served here, or by the follow handler's own second look)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        try:
            async with asyncio.timeout(FINAL_PUSH_TIMEOUT):
                await self._discover()
                await self._push()
        except (TimeoutError, ConnectionStoreError, ThreadStoreError) as exc:
            log.warning("run %s: the last push did not finish: %s", self.run_id, exc)

    async def _run(self) -> None:
        next_look = self._clock()
        while True:
            if self._clock() >= next_look:
                try:
                    await self._discover()
                except ConnectionStoreError as exc:
                    log.warning("run %s: followers not read: %s", self.run_id, exc)
                next_look = self._clock() + self.discover_every
            if self._dirty and self._followers:
                started = self._clock()
                try:
                    await self._push()
                except (ConnectionStoreError, ThreadStoreError) as exc:
                    log.warning("run %s: a push batch failed: %s", self.run_id, exc)
                    self._dirty = True
                except Exception:  # pushes are a courtesy: they never stop, nor stop the run
                    log.exception("run %s: a push batch failed", self.run_id)
                    self._dirty = True
                await asyncio.sleep(max(0.0, started + self.gap - self._clock()))
                continue
            self._wake.clear()
            if self._dirty and self._followers:
                continue
            try:
                async with asyncio.timeout(max(0.0, next_look - self._clock())):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _discover(self) -> None:
        listed = {f.connection_id: f for f in await self.connections.followers(self.run_id)}
        for gone in set(self._followers) - set(listed):
            del self._followers[gone]  # disconnected: its record is gone
        for connection_id, found in listed.items():
            if connection_id not in self._followers:
                self._followers[connection_id] = _Follower(
                    connection_id, found.run_id, found.position, found.position
                )
                self._dirty = True

    async def _picture(self) -> RunPicture:
        behind = [f.position.turn for f in self._followers.values()]
        if self._turn is None or any(t < self._turn and t not in self._committed for t in behind):
            # A follower stands in a turn committed before this invocation: read the thread.
            run = await self.threads.get_run(self.run_id)
            if self._turn is None:
                self._turn = run.turn
            messages = await self.threads.load_messages(run.thread_id)
            self._committed = {**run_turns(run, messages), **self._committed}
        status, error = self._ended if self._ended is not None else (None, None)
        return RunPicture(
            run_id="",
            turn=self._turn,
            committed=self._committed,
            text=self._text,
            calls=self._calls,
            ended=status,
            error=error,
        )

    async def _push(self) -> None:
        self._dirty = False
        if not self._followers:
            return
        picture = await self._picture()
        self.batches += 1
        await asyncio.gather(*(self._serve(f, picture) for f in list(self._followers.values())))

    async def _serve(self, follower: _Follower, picture: RunPicture) -> None:
        owed: list[tuple[Frame, Position | None]] = [(frame, None) for frame in follower.outbox]
        owed += frames_from(follower.position, replace(picture, run_id=follower.run_id))
        follower.outbox = []
        try:
            for frame, position in owed:
                if not await self.sender.deliver(follower.connection_id, frame):
                    await self._forget(follower)
                    return
                if position is not None:
                    follower.position = position
        except (ClientError, BotoCoreError) as exc:
            log.warning("run %s: a push failed, retried next batch: %s", self.run_id, exc)
            self._dirty = True
            return
        if follower.position.ended:
            await self._done(follower)
        elif follower.position.turn > follower.recorded.turn:
            follower.recorded = follower.position
            await self.connections.advance(self.run_id, follower.connection_id, follower.position)

    async def _done(self, follower: _Follower) -> None:
        """The follower was told the run ended: its follow ends (it no longer counts
        towards its connection's bound)."""
        self._followers.pop(follower.connection_id, None)
        await self.connections.end_follow(self.run_id, follower.connection_id)

    async def _forget(self, follower: _Follower) -> None:
        self._followers.pop(follower.connection_id, None)
        try:
            # Its follow of this run first: a record may outlive its connection's own.
            await self.connections.unfollow(self.run_id, follower.connection_id)
            await self.connections.forget(follower.connection_id)
        except ConnectionStoreError as exc:
            log.warning("run %s: a gone connection not forgotten: %s", self.run_id, exc)


def run_pusher(services: Services, run_id: str) -> RunPusher | None:
    """A pusher for ``run_id``, or None where the stack has no WebSocket API."""
    table = connections_table()
    if table is None or services.management is None:
        return None
    return RunPusher(
        run_id,
        connections=ConnectionStore(table, services.dynamodb),
        sender=FrameSender(services.management),
        threads=services.threads,
    )


@contextlib.asynccontextmanager
async def pushing(pusher: RunPusher | None) -> AsyncIterator[None]:
    """Run ``pusher``'s task for the block (nothing without one)."""
    if pusher is None:
        yield
        return
    async with pusher:
        yield


class PushingCheckpointStore:
    """The runner's checkpoint store, telling the pusher about every put that landed."""

    def __init__(self, store: StreamCheckpointStore, pusher: RunPusher) -> None:
        self.store = store
        self.pusher = pusher

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        return await self.store.get(run_id)

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        version = await self.store.put(checkpoint, expected_version=expected_version)
        self.pusher.durable(checkpoint)
        return version

    async def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        await self.store.delete(run_id, expected_version=expected_version)


class PushingRunner:
    """A turn runner whose turns report their start and events to the pusher."""

    def __init__(self, runner: Any, pusher: RunPusher) -> None:
        self.runner = runner
        self.pusher = pusher

    async def run_turn(self, turn: TurnRequest) -> TurnOutcome:
        self.pusher.turn_started(turn.turn)
        outcome: TurnOutcome = await self.runner.run_turn(turn, observer=self.pusher.observe)
        return outcome
