"""Commits the thread-store tests make on a seeded run (``tests.fixtures.runs.seed_run``)."""

from __future__ import annotations

from awaken_s3.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from awaken_s3.streaming.outcome import Usage
from awaken_s3.threads import RunState, RunStatus, TurnCommit

#: the input digest the ledger tests claim their calls with (any fixed value will do)
DIGEST = "5f0c3c1d2e4a6b8c9d0e1f2a3b4c5d6e"


def assistant_turn(
    run: RunState, text: str, *, usage: Usage | None = None, final: bool = False
) -> TurnCommit:
    return TurnCommit(
        base=run,
        messages=(Message.assistant(text),),
        usage=usage or Usage(10, 5),
        stop_reason="end_turn",
        final_status=RunStatus.COMPLETED if final else None,
    )


def tool_turn(run: RunState, call_id: str = "call-1") -> TurnCommit:
    message = Message(
        role="assistant",
        content=(
            TextBlock(text="adding"),
            ToolUseBlock(id=call_id, name="add", input={"a": 1, "b": 2}),
        ),
    )
    return TurnCommit(base=run, messages=(message,), usage=Usage(3, 4), stop_reason="tool_use")


def results_commit(run: RunState, call_id: str = "call-1", content: str = "3") -> TurnCommit:
    message = Message(role="user", content=(ToolResultBlock(tool_use_id=call_id, content=content),))
    return TurnCommit(base=run, messages=(message,), advance_turn=False)
