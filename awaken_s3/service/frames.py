"""The live protocol's frames, and what a follower is owed from where it stands (pure).

A follower of a run stands at a :class:`Position`: the run's turn it is in, the characters of
that turn's text it has, and the turn's complete tool calls it has. :func:`frames_from` says
which frames take it from there to what is durable of the run now (a :class:`RunPicture`: the
committed turns, the current turn's checkpointed text and complete tool calls, the end), each
frame with the position it leaves the follower at. The same function serves a follower's
catch-up (the socket handler, from the thread and the checkpoint) and the worker's live pushes,
so the two can neither disagree nor leave a gap between them.

Only durable text is ever in a picture (checkpointed or committed, never whitespace alone:
a resume may still replace that), so what a follower was sent is never taken back: the
committed turn extends it. Every frame fits one API Gateway WebSocket frame, measured in
encoded bytes (:data:`MAX_FRAME_BYTES`): text, and a tool call's input as JSON text, go in as
many pieces as that takes, each with its offset. :class:`FollowedText` is the client's side:
it assembles frames by offset (tool calls by turn and index), keeps only characters it does
not have, and records a gap should one ever come.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from awaken_s3.messages import Message, ToolUseBlock
from awaken_s3.streaming.recovery import has_reusable_text
from awaken_s3.threads.models import RunState

#: API Gateway's WebSocket frame size quota (32 KB, not raisable). A message posted through the
#: management API may be up to 128 KB, but API Gateway then splits it into frames of 32 KB, and
#: a client or proxy with a 32 KB frame limit closes the connection (1009); one message in one
#: frame is the limit kept here.
WEBSOCKET_FRAME_BYTES: Final = 32 * 1024
#: bytes of one encoded frame at most: one WebSocket frame, with room for its own header
MAX_FRAME_BYTES: Final = WEBSOCKET_FRAME_BYTES - 1024

Frame = dict[str, Any]

#: what an ``error`` frame says for each code: fixed sentences, never text from the message
ERROR_MESSAGES: Final[Mapping[str, str]] = {
    "invalid_message": "a message is a JSON object of at most 4096 bytes: "
    '{"action": "follow" | "cancel", "run_id": <id>, "after"?: <int>, "turn"?: <int>}',
    "invalid_id": "run_id must be a run id: ASCII letters, digits, '-' and '_', "
    "starting with a letter or digit",
    "not_found": "no such run of yours",
    "unauthorized": "this connection is not known; connect again",
    "unknown_action": 'send {"action": "follow" | "cancel", "run_id": ...}',
    "too_many_follows": "this connection follows too many runs; "
    "open another connection or wait for a followed run to end",
    "unavailable": "the message could not be served now; send it again",
}
_OTHER_ERROR: Final = "the message could not be served"


def encode_frame(frame: Frame) -> bytes:
    """A frame as it is posted: compact JSON in UTF-8. Text no UTF-8 can carry (a lone
    surrogate a provider sent) is escaped instead, so encoding never fails."""
    try:
        return json.dumps(frame, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(frame, separators=(",", ":")).encode("ascii")


def frame_fits(frame: Frame) -> bool:
    return len(encode_frame(frame)) <= MAX_FRAME_BYTES


def input_json(call: ToolUseBlock) -> str:
    """A tool call's input as the JSON text its ``tool_call`` frames carry: keys sorted, so
    that any worker (or the committed turn) writes the same text, and offsets agree."""
    return json.dumps(call.input, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True, slots=True)
class Position:
    """Where a follower stands: ``offset`` characters and ``calls`` complete tool calls of
    the run's turn ``turn``, and ``call_offset`` characters of the next call's input (a
    large input goes in several frames); ``ended``: it was told the run ended."""

    turn: int
    offset: int = 0
    calls: int = 0
    ended: bool = False
    call_offset: int = 0


@dataclass(frozen=True, slots=True)
class RunPicture:
    """What is durable of a run now."""

    #: the run's id as its caller names it
    run_id: str
    #: the run's current turn: every turn below it is committed
    turn: int
    #: committed turns of the run by turn index (those a follower may still need)
    committed: Mapping[int, Message] = field(default_factory=dict)
    #: the current turn's checkpointed text (durable), and its complete tool calls in order
    text: str = ""
    calls: tuple[ToolUseBlock, ...] = ()
    #: the run's status once it ended (None while it runs), and its public error
    ended: str | None = None
    error: Mapping[str, str] | None = None


def text_frame(run_id: str, turn: int, offset: int, text: str) -> Frame:
    return {"type": "text", "run_id": run_id, "turn": turn, "offset": offset, "text": text}


def tool_call_frame(
    run_id: str, turn: int, index: int, call: ToolUseBlock, offset: int, piece: str, length: int
) -> Frame:
    """One piece of tool call ``index`` of turn ``turn``: ``input_json[offset:]`` starts with
    ``piece``; the input is the JSON text of ``input_length`` characters the pieces make."""
    return {
        "type": "tool_call",
        "run_id": run_id,
        "turn": turn,
        "index": index,
        "id": call.id,
        "name": call.name,
        "offset": offset,
        "input_length": length,
        "input_json": piece,
    }


def resumed_frame(run_id: str, turn: int, plan: str, retry_count: int) -> Frame:
    return {
        "type": "resumed",
        "run_id": run_id,
        "turn": turn,
        "plan": plan,
        "retry_count": retry_count,
    }


def turn_committed_frame(run_id: str, turn: int, message: Message) -> Frame:
    return {
        "type": "turn_committed",
        "run_id": run_id,
        "turn": turn,
        "text_length": len(message.text),
        "tool_calls": len(message.tool_uses),
    }


def run_ended_frame(run_id: str, status: str, error: Mapping[str, str] | None = None) -> Frame:
    return {"type": "run_ended", "run_id": run_id, "status": status, "error": error}


def error_frame(code: str, run_id: str | None = None) -> Frame:
    """A refusal, with the fixed sentence of its code."""
    message = ERROR_MESSAGES.get(code, _OTHER_ERROR)
    return {"type": "error", "code": code, "message": message, "run_id": run_id}


def skipped_frame(frame: Frame) -> Frame:
    """What a follower gets instead of a frame API Gateway refused as too large (never
    expected: frames are cut to fit): which part of which turn it lacks."""
    out: Frame = {"type": "skipped", "run_id": frame.get("run_id"), "turn": frame.get("turn")}
    out["of"] = frame.get("type")
    for name in ("index", "offset"):
        if name in frame:
            out[name] = frame[name]
    return out


def _pieces(
    frame_of: Callable[[int, str], Frame], text: str, start: int
) -> list[tuple[Frame, int]]:
    """``text`` from ``start`` in frames ``frame_of(offset, piece)`` each at most
    :data:`MAX_FRAME_BYTES` encoded, with the offset each ends at. A piece is the longest that
    fits (found by bisection on the encoded frame itself, so escapes and multi-byte characters
    count as they are sent); every character costs a byte at least, so none is longer than
    the byte budget."""
    out: list[tuple[Frame, int]] = []
    offset = start
    while offset < len(text):
        low, high = 1, min(len(text) - offset, MAX_FRAME_BYTES)
        if frame_fits(frame_of(offset, text[offset : offset + high])):
            low = high  # the common case: what is left fits one frame
        while low < high:
            middle = (low + high + 1) // 2
            if frame_fits(frame_of(offset, text[offset : offset + middle])):
                low = middle
            else:
                high = middle - 1
        out.append((frame_of(offset, text[offset : offset + low]), offset + low))
        offset += low
    return out


def _text_frames(run_id: str, at: Position, text: str) -> list[tuple[Frame, Position]]:
    def frame_of(offset: int, piece: str) -> Frame:
        return text_frame(run_id, at.turn, offset, piece)

    return [(f, replace(at, offset=end)) for f, end in _pieces(frame_of, text, at.offset)]


def _call_frames(
    run_id: str, at: Position, index: int, call: ToolUseBlock
) -> list[tuple[Frame, Position]]:
    text = input_json(call)
    start = at.call_offset if index == at.calls and at.call_offset < len(text) else 0

    def frame_of(offset: int, piece: str) -> Frame:
        return tool_call_frame(run_id, at.turn, index, call, offset, piece, len(text))

    return [
        (f, replace(at, calls=index + 1, call_offset=0))
        if end == len(text)
        else (f, replace(at, calls=index, call_offset=end))
        for f, end in _pieces(frame_of, text, start)
    ]


def _turn_frames(
    run_id: str, at: Position, text: str, calls: Sequence[ToolUseBlock]
) -> tuple[list[tuple[Frame, Position]], Position]:
    frames = _text_frames(run_id, at, text) if len(text) > at.offset else []
    if frames:
        at = frames[-1][1]
    for index in range(at.calls, len(calls)):
        pieces = _call_frames(run_id, at, index, calls[index])
        frames.extend(pieces)
        at = pieces[-1][1]
    return frames, at


def frames_from(at: Position, picture: RunPicture) -> list[tuple[Frame, Position]]:
    """The frames that take a follower from ``at`` to ``picture``, each with where it leaves
    the follower. A committed turn the picture lacks is skipped (its frames are owed by
    whoever has it); text the follower claims beyond what is durable is simply not sent."""
    run_id = picture.run_id
    out: list[tuple[Frame, Position]] = []
    if at.ended:
        return out
    while at.turn < picture.turn:
        message = picture.committed.get(at.turn)
        if message is not None:
            frames, at = _turn_frames(run_id, at, message.text, message.tool_uses)
            out.extend(frames)
            out.append((turn_committed_frame(run_id, at.turn, message), Position(at.turn + 1)))
        at = Position(at.turn + 1)
    if at.turn == picture.turn and picture.ended is None:
        frames, at = _turn_frames(run_id, at, picture.text, picture.calls)
        out.extend(frames)
    if picture.ended is not None:
        out.append((run_ended_frame(run_id, picture.ended, picture.error), replace(at, ended=True)))
    return out


def durable_text(text: str) -> str:
    """The part of a checkpoint's text that may be shown: all of it, unless it is only
    whitespace (a restart, plan R4, may replace that)."""
    return text if has_reusable_text(text) else ""


def run_turns(run: RunState, messages: Sequence[Message]) -> dict[int, Message]:
    """The committed model turns of ``run`` by turn index: the last ``run.turn`` assistant
    messages of the thread as the run last advanced it (one live run per thread)."""
    mine = [m for m in messages[: run.message_count] if m.role == "assistant"]
    count = min(run.turn, len(mine))
    return {run.turn - count + i: m for i, m in enumerate(mine[len(mine) - count :])}


@dataclass
class FollowedCall:
    """A tool call as a client assembles it from its ``tool_call`` frames."""

    turn: int
    index: int
    id: str
    name: str
    length: int
    input_json: str = ""

    @property
    def complete(self) -> bool:
        return len(self.input_json) == self.length

    @property
    def input(self) -> Any:
        """The call's input (once complete)."""
        return json.loads(self.input_json)


@dataclass
class FollowedText:
    """A client's view of a followed run, assembled from frames by offset."""

    turn: int | None = None
    text: str = ""
    #: text of each turn the run committed, as assembled
    committed: dict[int, str] = field(default_factory=dict)
    #: tool calls by (turn, index): a provider's call ids may repeat across turns
    tool_calls: dict[tuple[int, int], FollowedCall] = field(default_factory=dict)
    plans: list[str] = field(default_factory=list)
    status: str | None = None
    error: Mapping[str, str] | None = None
    #: characters received again (a resumed worker re-sends from the offset a follow named)
    repeated: int = 0
    #: frames whose offset lay past the text held: never expected
    gaps: list[Frame] = field(default_factory=list)
    #: ``skipped`` frames: parts of a turn API Gateway refused to carry (read the turn from
    #: the HTTP API once it is committed)
    skipped: list[Frame] = field(default_factory=list)

    def position(self) -> tuple[int | None, int]:
        """``(turn, after)`` to name in a follow after a reconnect."""
        return self.turn, len(self.text)

    def _enter(self, turn: int) -> bool:
        """Move to ``turn`` (False: the frame is of a turn already behind)."""
        if self.turn is not None and turn < self.turn:
            return False
        if self.turn != turn:
            self.turn, self.text = turn, ""
        return True

    def _text(self, turn: int, offset: int, text: str, frame: Frame) -> str:
        if turn in self.committed or not self._enter(turn):
            self.repeated += len(text)
            return ""
        if offset > len(self.text):
            self.gaps.append(frame)
            return ""
        new = text[len(self.text) - offset :]
        self.repeated += len(text) - len(new)
        self.text += new
        return new

    def _tool_call(self, frame: Frame) -> None:
        turn, index, offset = int(frame["turn"]), int(frame["index"]), int(frame["offset"])
        piece = str(frame["input_json"])
        if turn in self.committed or not self._enter(turn):
            self.repeated += len(piece)
            return
        call = self.tool_calls.setdefault(
            (turn, index),
            FollowedCall(
                turn, index, str(frame["id"]), str(frame["name"]), int(frame["input_length"])
            ),
        )
        if offset > len(call.input_json):
            self.gaps.append(frame)
            return
        new = piece[len(call.input_json) - offset :][: call.length - len(call.input_json)]
        self.repeated += len(piece) - len(new)
        call.input_json += new

    def apply(self, frame: Frame) -> str:
        """Fold one frame in; the new characters it brought (text frames)."""
        kind = frame.get("type")
        if self.status is not None or kind in ("error", "following"):
            return ""
        if kind == "text":
            return self._text(int(frame["turn"]), int(frame["offset"]), str(frame["text"]), frame)
        if kind == "tool_call":
            self._tool_call(frame)
        elif kind == "skipped":
            self.skipped.append(frame)
        elif kind == "resumed":
            self.plans.append(str(frame["plan"]))
        elif kind == "turn_committed":
            turn = int(frame["turn"])
            if self._enter(turn):
                self.committed[turn] = self.text
                self.turn, self.text = turn + 1, ""
        elif kind == "run_ended":
            self.status, self.error = str(frame["status"]), frame.get("error")
        return ""

    def calls_of(self, turn: int) -> list[FollowedCall]:
        """Turn ``turn``'s tool calls held, in order."""
        return [call for (t, _), call in sorted(self.tool_calls.items()) if t == turn]

    @property
    def last_turn_text(self) -> str | None:
        """The text of the last turn the run committed, as assembled."""
        return self.committed[max(self.committed)] if self.committed else None
