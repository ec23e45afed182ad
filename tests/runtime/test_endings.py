"""How a completed turn moves its run: refusals fail it visibly, pause_turn re-sends it."""

from __future__ import annotations

import pytest

from awaken_s3.messages import Message, ProviderBlock, TextBlock, ToolUseBlock
from awaken_s3.runtime.endings import TurnEnding, turn_ending
from awaken_s3.runtime.loop import RunEnd
from awaken_s3.streaming.events import (
    ProviderBlockDone,
    RefusalDelta,
    StopEvent,
    TextDelta,
    UsageEvent,
)
from awaken_s3.streaming.outcome import ClassifiedError, TurnCompleted, Usage
from awaken_s3.streaming.refusal import REFUSAL_NOTICE
from awaken_s3.streaming.scripted import ScriptedProvider, text_turn
from awaken_s3.threads import RunStatus, ThreadStore
from tests.fixtures.runs import seed_run
from tests.runtime.conftest import LoopFactory
from tests.runtime.scripts import Effects, adding_registry

PROMPT = "Tell me something I should not know."
CALL = ToolUseBlock(id="c1", name="add", input={"a": 1, "b": 2})


def completed(message: Message, stop_reason: str) -> TurnCompleted:
    return TurnCompleted(message=message, stop_reason=stop_reason, usage=Usage(), plan_kind=None)


@pytest.mark.parametrize(
    ("message", "stop_reason", "ending"),
    [
        (Message.assistant("Done."), "end_turn", TurnEnding(RunStatus.COMPLETED)),
        (Message.assistant("Cut."), "max_tokens", TurnEnding(RunStatus.COMPLETED)),
        (Message(role="assistant", content=(CALL,)), "tool_use", TurnEnding(None)),
        (Message.assistant("Searching."), "pause_turn", TurnEnding(None)),
        (
            Message(role="assistant", content=(TextBlock(text="Hel"), TextBlock(text="No."))),
            "refusal",
            TurnEnding(RunStatus.FAILED, ClassifiedError("refusal", "No.", retryable=False)),
        ),
    ],
)
def test_turn_ending(message: Message, stop_reason: str, ending: TurnEnding) -> None:
    assert turn_ending(completed(message, stop_reason)) == ending


async def test_a_refusal_fails_the_run_with_the_refusal_committed(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    provider = ScriptedProvider(
        [[RefusalDelta("I can't "), RefusalDelta("help with that."), StopEvent("refusal")]]
    )
    result = await make_loop(provider, adding_registry(Effects())).run("r1")
    assert result.end == RunEnd.FAILED
    assert result.error == ClassifiedError("refusal", "I can't help with that.", retryable=False)
    run = await threads.get_run("r1")
    assert (run.status, run.stop_reason, run.error, run.turn) == (
        RunStatus.FAILED,
        "refusal",
        result.error,
        1,
    )
    messages = await threads.load_messages("t1")
    assert messages[-1] == Message.assistant("I can't help with that.")


async def test_a_refusal_without_words_commits_a_notice_not_an_empty_message(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    provider = ScriptedProvider([[StopEvent("refusal")]])
    result = await make_loop(provider, adding_registry(Effects())).run("r1")
    assert result.end == RunEnd.FAILED and result.error is not None
    assert result.error.message == REFUSAL_NOTICE
    assert (await threads.load_messages("t1"))[-1] == Message.assistant(REFUSAL_NOTICE)


async def test_pause_turn_resends_the_paused_turn_and_the_run_goes_on(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    search = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}
    provider = ScriptedProvider(
        [
            [
                TextDelta("Searching."),
                ProviderBlockDone("anthropic", search),
                StopEvent("pause_turn"),
            ],
            text_turn("Found it."),
        ]
    )
    result = await make_loop(provider, adding_registry(Effects())).run("r1")
    assert result.end == RunEnd.COMPLETED and result.turns_committed == 2
    paused = Message(
        role="assistant",
        content=(ProviderBlock(provider="anthropic", block=search), TextBlock(text="Searching.")),
    )
    # The second request is the thread as committed, ending with the paused message.
    assert list(provider.requests[1].messages)[-1] == paused
    assert (await threads.load_messages("t1"))[1:] == [paused, Message.assistant("Found it.")]


async def test_run_usage_keeps_cache_reads_and_writes_apart(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    provider = ScriptedProvider(
        [[TextDelta("Hi."), UsageEvent(12, 3, 400, 50), StopEvent("end_turn")]]
    )
    await make_loop(provider, adding_registry(Effects())).run("r1")
    assert (await threads.get_run("r1")).usage == Usage(12, 3, 400, 50)
