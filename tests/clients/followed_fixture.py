"""Frame sequences made by the server's own ``frames_from`` and what the Python reference
client (:class:`FollowedText`) assembles from them, for the TypeScript client to match.

``clients/typescript/test/fixtures/followed.json`` is this module's output; the Node test
``followed.test.ts`` folds each sequence into the TypeScript ``FollowedRun`` and must hold
exactly what ``FollowedText`` held; ``tests/clients/test_ts_protocol.py`` fails when the file
is not what this module writes now::

    .venv/bin/python -m tests.clients.followed_fixture \
        > clients/typescript/test/fixtures/followed.json

The sequences are the hard cases: text of wide characters, escapes and astral code points cut
into many frames by encoded size, re-sent from behind after a resume, a 200 KB tool input in
pieces, provider call ids repeating across turns, frames of a turn already committed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

from awaken_s3.messages import Message, TextBlock, ToolUseBlock
from awaken_s3.service.frames import (
    FollowedText,
    Frame,
    Position,
    RunPicture,
    frames_from,
    resumed_frame,
)

ROOT: Final = Path(__file__).resolve().parents[2]
FIXTURE: Final = ROOT / "clients" / "typescript" / "test" / "fixtures" / "followed.json"

#: text that costs many bytes per character as sent: astral, wide, escaped, combining
WIDE: Final = (
    'Ünïcödé 🌍🚀 "quoted" \\ back\\slash\n\ttab 漢字かな e\u0301 \U0001f9d1\u200d\U0001f4bb '
)


def _assistant(text: str, *calls: ToolUseBlock) -> Message:
    return Message(role="assistant", content=(TextBlock(text=text), *calls))


def _frames(at: Position, picture: RunPicture) -> list[Frame]:
    return [frame for frame, _ in frames_from(at, picture)]


def long_text_resumed() -> list[Frame]:
    """A long turn pushed in growing pictures, a resume that re-sends from behind, the end."""
    text = WIDE * 500  # about 33,000 characters, 50 KB and more as JSON
    run = "r-long"
    out: list[Frame] = []
    out += _frames(Position(0), RunPicture(run, 0, text=text[:10_000]))
    out += _frames(Position(0, 10_000), RunPicture(run, 0, text=text[:22_000]))
    out.append(resumed_frame(run, 0, "R1", 1))
    # The new worker serves the follower from the offset its follow had recorded: 6,789.
    out += _frames(Position(0, 6_789), RunPicture(run, 0, text=text))
    final = _assistant(text)
    out += _frames(Position(0, 15_000), RunPicture(run, 1, committed={0: final}, ended="completed"))
    return out


def tool_calls_across_turns() -> list[Frame]:
    """Two turns whose calls share the provider id ``call_0``; a big input in pieces, sent
    again from its start on a reconnect's catch-up; late frames of the committed turn."""
    run = "r-tools"
    big = ToolUseBlock(id="call_0", name="write", input={"body": WIDE * 700, "n": 1})
    small = ToolUseBlock(id="call_0", name="lookup", input={"q": "🌍"})
    first = _assistant("Writing it down.", big, small)
    second = _assistant("Done: ✓")
    out: list[Frame] = []
    partial = RunPicture(run, 0, text="Writing it down.", calls=(big,))
    catch_up = _frames(Position(0), partial)
    out += catch_up[:4]
    out += catch_up  # a reconnect's catch-up sends every call of the turn again
    done = RunPicture(run, 1, committed={0: first}, text="Done")
    out += _frames(Position(0, 16, calls=1), done)
    out += catch_up[:2]  # late frames of turn 0, once it is committed: ignored
    end = RunPicture(run, 2, committed={1: second}, ended="completed")
    out += _frames(Position(1, 4), end)
    return out


def failed_run() -> list[Frame]:
    run = "r-fail"
    error = {"code": "throttled", "message": "the model provider throttled the request"}
    out = _frames(Position(0), RunPicture(run, 0, text="Hel"))
    out.append(resumed_frame(run, 0, "R4", 2))
    out += _frames(Position(0, 3), RunPicture(run, 0, text="Hello", ended="failed", error=error))
    return out


def assembled(frames: list[Frame]) -> dict[str, Any]:
    view = FollowedText()
    for frame in frames:
        view.apply(frame)
    return {
        "turn": view.turn,
        "text": view.text,
        "committed": {str(turn): text for turn, text in view.committed.items()},
        "tool_calls": {
            f"{turn}:{index}": {"id": call.id, "name": call.name, "input_json": call.input_json}
            for (turn, index), call in view.tool_calls.items()
        },
        "plans": view.plans,
        "status": view.status,
        "error": dict(view.error) if view.error else None,
        "repeated": view.repeated,
        "gaps": len(view.gaps),
    }


def render() -> str:
    cases = {
        "long text resumed from behind": long_text_resumed(),
        "tool calls across turns": tool_calls_across_turns(),
        "failed run": failed_run(),
    }
    body = [{"name": name, "frames": f, "expected": assembled(f)} for name, f in cases.items()]
    return json.dumps(body, ensure_ascii=False, indent=1) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
