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
committed turn extends it. :class:`FollowedText` is the client's side: it assembles frames by
offset, keeps only characters it does not have, and records a gap should one ever come.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from awaken_s3.messages import Message, ToolUseBlock
from awaken_s3.streaming.recovery import has_reusable_text
from awaken_s3.threads.models import RunState

#: characters of text per frame at most: 4 UTF-8 bytes each stays under API Gateway's 32 KB
#: WebSocket frame (a message may span frames up to 128 KB; one frame is cheaper)
MAX_FRAME_TEXT: Final = 7000

Frame = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Position:
    """Where a follower stands: ``offset`` characters and ``calls`` complete tool calls of
    the run's turn ``turn``; ``ended``: it was told the run ended."""

    turn: int
    offset: int = 0
    calls: int = 0
    ended: bool = False


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


def tool_call_frame(run_id: str, turn: int, index: int, call: ToolUseBlock) -> Frame:
    return {
        "type": "tool_call",
        "run_id": run_id,
        "turn": turn,
        "index": index,
        "id": call.id,
        "name": call.name,
        "input": call.input,
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


def error_frame(code: str, message: str, run_id: str | None = None) -> Frame:
    return {"type": "error", "code": code, "message": message, "run_id": run_id}


def _text_frames(run_id: str, at: Position, text: str) -> list[tuple[Frame, Position]]:
    out = []
    offset = at.offset
    while offset < len(text):
        piece = text[offset : offset + MAX_FRAME_TEXT]
        out.append(
            (text_frame(run_id, at.turn, offset, piece), replace(at, offset=offset + len(piece)))
        )
        offset += len(piece)
    return out


def _turn_frames(
    run_id: str, at: Position, text: str, calls: Sequence[ToolUseBlock]
) -> tuple[list[tuple[Frame, Position]], Position]:
    frames = _text_frames(run_id, at, text) if len(text) > at.offset else []
    if frames:
        at = frames[-1][1]
    for index in range(at.calls, len(calls)):
        at = replace(at, calls=index + 1)
        frames.append((tool_call_frame(run_id, at.turn, index, calls[index]), at))
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
class FollowedText:
    """A client's view of a followed run, assembled from frames by offset."""

    turn: int | None = None
    text: str = ""
    #: text of each turn the run committed, as assembled
    committed: dict[int, str] = field(default_factory=dict)
    tool_calls: dict[str, Frame] = field(default_factory=dict)
    plans: list[str] = field(default_factory=list)
    status: str | None = None
    error: Mapping[str, str] | None = None
    #: characters received again (a resumed worker re-sends from the offset a follow named)
    repeated: int = 0
    #: frames whose offset lay past the text held: never expected
    gaps: list[Frame] = field(default_factory=list)

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

    def apply(self, frame: Frame) -> str:
        """Fold one frame in; the new characters it brought (text frames)."""
        kind = frame.get("type")
        if self.status is not None or kind in ("error", "following"):
            return ""
        if kind == "text":
            turn, offset, text = int(frame["turn"]), int(frame["offset"]), str(frame["text"])
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
        if kind == "tool_call":
            self.tool_calls.setdefault(str(frame["id"]), frame)
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

    @property
    def last_turn_text(self) -> str | None:
        """The text of the last turn the run committed, as assembled."""
        return self.committed[max(self.committed)] if self.committed else None
