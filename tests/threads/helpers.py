from __future__ import annotations

from awaken_s3.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from awaken_s3.streaming.outcome import Usage
from awaken_s3.threads import RunSettings, RunState, RunStatus, ThreadStore, TurnCommit

OWNER = "alice"
SETTINGS = RunSettings(model="scripted-1", system="be brief", max_tokens=256, tools=("add",))


async def new_run(
    store: ThreadStore,
    thread_id: str = "t1",
    run_id: str = "r1",
    prompt: str = "hi",
    *,
    settings: RunSettings = SETTINGS,
) -> RunState:
    """A thread with one queued run, as the API creates it (and no message sent for it)."""
    await store.create_thread(thread_id, owner=OWNER)
    return await store.create_run(
        run_id, thread_id=thread_id, owner=OWNER, settings=settings, messages=[Message.user(prompt)]
    )


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
