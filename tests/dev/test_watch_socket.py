"""`awaken-s3 runs watch` over the socket: the lines it prints for the frames a run's
follower gets (pure): each tool call once, when its last piece came, per turn, though a
provider's call ids repeat across turns."""

from __future__ import annotations

from unittest import mock

from awaken_s3.dev.watch_socket import frame_lines
from awaken_s3.messages import Message, TextBlock, ToolUseBlock
from awaken_s3.service import frames
from awaken_s3.service.frames import FollowedText, Position, RunPicture, frames_from


def assistant(text: str, *calls: ToolUseBlock) -> Message:
    return Message(role="assistant", content=(TextBlock(text=text), *calls))


def test_each_turn_s_call_0_is_shown_once_whole_though_its_input_came_in_pieces() -> None:
    first = ToolUseBlock(id="call_0", name="save", input={"note": "x" * 400})
    second = ToolUseBlock(id="call_0", name="save", input={"note": "second"})
    picture = RunPicture(
        "r1",
        turn=2,
        committed={0: assistant("a", first), 1: assistant("b", second)},
        ended="completed",
    )
    view = FollowedText()
    lines: list[str] = []
    with mock.patch.object(frames, "MAX_FRAME_BYTES", 200):
        owed = [frame for frame, _ in frames_from(Position(0), picture)]
    assert sum(frame["type"] == "tool_call" for frame in owed) > 3  # the first in pieces
    for frame in [f for f in owed for _ in (1, 2)]:  # each twice, as after a crash
        lines += frame_lines(view, frame)
    calls = [line for line in lines if line.startswith("tool call")]
    assert calls == [
        'tool call call_0 save: complete {"note": "' + "x" * 400 + '"}',
        'tool call call_0 save: complete {"note": "second"}',
    ]
    assert lines[-1] == "status: completed"
