"""Where a test kills its worker: kill points, and the markers that say one was reached.

A :class:`KillPoint` names a moment of a run: ``text(chars, turn=)`` once the turn's text is
that long, ``inside_tool_call(name, turn=)`` halfway through a call's arguments,
``tool_calls_done(turn=)`` once every call of the turn is complete but before the turn is
committed, ``tool(name, when=)`` just before a tool's function runs (``"before"``: the call is
claimed) or just after it returned (``"after"``: its effect happened, its result is not
recorded yet).

The worker container reaches the point, writes the point's marker with what the stream had
sent there (once: the file is created exclusively, so the resumed worker passes the same point
without stopping) and waits there. The harness sees the marker, waits until the run's
checkpoint holds what the stream had sent (:func:`checkpoint_ready`, pure) and SIGKILLs the
container through the event source, as Lambda would lose it. Nothing is timed: the worker
cannot move past the point before it is killed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from awaken_s3.models import StreamCheckpoint

Kind = Literal["text", "tool_call", "tool_calls_done", "tool"]
#: the file the harness writes the armed points to, in its directory
PLAN_FILE = "kill-points.json"


@dataclass(frozen=True)
class KillPoint:
    kind: Kind
    #: the model turn of the run (1: the first answer to the caller's message)
    turn: int = 1
    #: for ``text``: the length of the turn's text at the kill
    chars: int = 0
    #: for ``tool_call`` (None: the turn's first call) and ``tool``
    tool_name: str | None = None
    #: for ``tool``: ``before`` its function runs, or ``after`` it returned
    when: Literal["before", "after"] = "after"

    def __post_init__(self) -> None:
        if self.turn < 1:
            raise ValueError("turn counts from 1")
        if self.kind == "text" and self.chars < 1:
            raise ValueError("a text kill point needs chars >= 1")
        if self.kind == "tool" and not self.tool_name:
            raise ValueError("a tool kill point names the tool")
        if self.when not in ("before", "after"):
            raise ValueError("when is 'before' or 'after'")

    @classmethod
    def text(cls, chars: int = 20, *, turn: int = 1) -> KillPoint:
        """Once the turn's text is ``chars`` long (a resume continues it: plan R1)."""
        return cls("text", turn=turn, chars=chars)

    @classmethod
    def inside_tool_call(cls, name: str | None = None, *, turn: int = 1) -> KillPoint:
        """Halfway through the arguments of the call to ``name`` (the turn's first call when
        None): the call is broken, so a resume drops it (R3, or R2 for the calls before it)."""
        return cls("tool_call", turn=turn, tool_name=name)

    @classmethod
    def tool_calls_done(cls, *, turn: int = 1) -> KillPoint:
        """Every call of the turn is complete, the turn is not committed (R2: no model call)."""
        return cls("tool_calls_done", turn=turn)

    @classmethod
    def tool(cls, name: str, *, when: Literal["before", "after"] = "after") -> KillPoint:
        """While the tool's call runs: ``after`` its function returned (its effect happened,
        its result is not recorded), or ``before`` it runs (the call is claimed)."""
        return cls("tool", tool_name=name, when=when)

    def describe(self) -> str:
        if self.kind == "text":
            return f"turn {self.turn} at {self.chars} characters of text"
        if self.kind == "tool_call":
            return f"turn {self.turn} inside the arguments of {self.tool_name or 'its first call'}"
        if self.kind == "tool_calls_done":
            return f"turn {self.turn} after its tool calls, before its commit"
        return f"{self.when} tool {self.tool_name} runs"


def write_plan(directory: Path, points: Sequence[KillPoint]) -> None:
    path = directory / PLAN_FILE
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps([asdict(point) for point in points]))
    temporary.replace(path)


def read_plan(directory: Path) -> list[KillPoint]:
    try:
        raw: list[dict[str, Any]] = json.loads((directory / PLAN_FILE).read_text())
    except FileNotFoundError:
        return []
    return [KillPoint(**item) for item in raw]


def marker(directory: Path, index: int) -> Path:
    return directory / f"kill-{index}.reached"


@dataclass(frozen=True)
class StreamState:
    """What a turn's stream had sent when it reached a kill point."""

    text: int = 0
    calls: int = 0
    closed: int = 0


def claim_marker(directory: Path, index: int, state: StreamState | None = None) -> bool:
    """Mark point ``index`` reached, with the stream's ``state`` there (None: a tool point);
    False when an earlier worker reached it already."""
    try:
        descriptor = os.open(marker(directory, index), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w") as file:
        file.write(json.dumps({"pid": os.getpid(), "state": asdict(state) if state else None}))
    return True


def reached(directory: Path, index: int) -> tuple[bool, StreamState | None]:
    """Whether point ``index`` was reached, and the stream's state there."""
    try:
        raw = json.loads(marker(directory, index).read_text() or "null")
    except FileNotFoundError:
        return False, None
    if not isinstance(raw, dict):  # created, not written yet
        return False, None
    state = raw.get("state")
    return True, StreamState(**state) if state else None


def checkpoint_ready(state: StreamState | None, checkpoint: StreamCheckpoint | None) -> bool:
    """Whether the run's checkpoint holds the stream's ``state`` at the point, all a resume
    can find (pure). The stream waits at the point, so its checkpoint only grows towards that
    state, never past it. A tool point (no state) needs none: the turn is committed before its
    tools run."""
    if state is None:
        return True
    if checkpoint is None:
        return False
    calls = checkpoint.tool_calls
    return (
        len(checkpoint.partial_text) >= state.text
        and len(calls) >= state.calls
        and sum(1 for call in calls if call.closed) >= state.closed
    )
