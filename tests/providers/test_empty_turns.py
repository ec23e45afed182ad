"""Empty completions on the real SDKs, against wire servers that hold the providers' rule: a
message's content must be non-empty (Anthropic: except an optional final assistant message)
and no text block blank. An empty turn is committed with a notice, so the thread's next run
is accepted; a thread that already holds an empty assistant message is mended in the request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from awaken_s3.messages import Message, TextBlock
from awaken_s3.runtime.loop import RunEnd, RunLoop
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.recovery import EMPTY_TURN_NOTICE
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads import InMemoryThreadStore, RunSettings, RunStatus
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import OWNER, seed_run
from tests.providers.wire import anthropic_wire as aw
from tests.providers.wire import bedrock_wire as bw
from tests.providers.wire.dialects import by_name
from tests.providers.wire.server import Received, Scripted, WireServer
from tests.providers.wire.validation import anthropic_content_rules, bedrock_content_rules

pytestmark = pytest.mark.slow


async def _no_sleep(delay: float) -> None:
    return None


def empty_turn(name: str) -> Scripted:
    """A completion with no content block at all, as a provider may send it."""
    if name == "anthropic":
        return aw.stream(aw.message_start(), *aw.message_end("end_turn", output_tokens=0))
    return bw.stream(bw.message_start(), bw.message_stop("end_turn"), bw.metadata(12, 0))


def text_turn(name: str, text: str) -> Scripted:
    if name == "anthropic":
        return aw.stream(aw.message_start(), aw.text_block(0, [text]), *aw.message_end())
    return bw.stream(
        bw.message_start(),
        bw.text(0, text),
        bw.block_stop(0),
        bw.message_stop("end_turn"),
        bw.metadata(20, 5),
    )


RULES: dict[str, Any] = {"anthropic": anthropic_content_rules, "bedrock": bedrock_content_rules}


class Thread:
    """One thread on in-memory stores, its runs streamed from ``name``'s SDK on the wire."""

    def __init__(self, name: str, wire: WireServer) -> None:
        self.d = by_name(name)
        self.threads = InMemoryThreadStore(clock=FakeClock())
        checkpoints = InMemoryStreamCheckpointStore()
        runner = TurnRunner(
            self.d.provider(wire),
            checkpoints,
            writer_id="worker-1",
            retry_policy=RetryPolicy(base_delay=0.0, max_delay=0.0),
            sleep=_no_sleep,
        )
        self.loop = RunLoop(
            self.threads, runner, checkpoints, worker_id="worker-1", clock=FakeClock()
        )
        self.settings = RunSettings(model=self.d.model)

    async def run(self, run_id: str, prompt: str, *, first: bool) -> Any:
        if first:
            await seed_run(self.threads, run_id, prompt=prompt, settings=self.settings)
        else:
            await self.threads.create_run(
                run_id,
                thread_id="t1",
                owner=OWNER,
                settings=self.settings,
                messages=[Message.user(prompt)],
            )
        return await self.loop.run(run_id)


def sent_messages(received: Received) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = received.json()["messages"]
    return messages


@pytest.mark.parametrize("name", ["anthropic", "bedrock"])
async def test_an_empty_completion_is_committed_with_a_notice_and_the_next_run_succeeds(
    wire: WireServer, name: str
) -> None:
    wire.validate = RULES[name]
    wire.push(empty_turn(name), text_turn(name, "Here it is."))
    thread = Thread(name, wire)

    first = await thread.run("r1", "Say something.", first=True)
    assert first.end == RunEnd.COMPLETED, first
    assert first.run.status == RunStatus.COMPLETED
    # Committed once, as one message per model turn, never as an empty content list.
    assert first.turns_committed == 1 and first.run.message_count == 2
    messages = await thread.threads.load_messages("t1")
    assert messages[1] == Message.assistant(EMPTY_TURN_NOTICE)

    second = await thread.run("r2", "Try again.", first=False)
    assert second.end == RunEnd.COMPLETED, second
    assert len(wire.received) == 2  # the server refused nothing
    resent = sent_messages(wire.received[1])
    assert [m["role"] for m in resent] == ["user", "assistant", "user"]
    assert all(m["content"] for m in resent)
    messages = await thread.threads.load_messages("t1")
    assert messages[-1] == Message.assistant("Here it is.")


@pytest.mark.parametrize("name", ["anthropic", "bedrock"])
@pytest.mark.parametrize(
    "empty",
    [
        Message(role="assistant", content=()),
        Message(role="assistant", content=(TextBlock(text=" \n\t"),)),
    ],
    ids=["no-content", "blank-text"],
)
async def test_a_thread_holding_an_empty_assistant_message_is_mended_in_the_request(
    wire: WireServer, name: str, empty: Message
) -> None:
    """A thread an older build committed an empty turn to: the request leaves it out and
    sends the user messages around it as one; the thread itself keeps what happened."""
    wire.validate = RULES[name]
    wire.push(text_turn(name, "Answered."))
    thread = Thread(name, wire)
    store = thread.threads
    await store.create_thread("t1", owner=OWNER)
    history = [Message.user("First question."), empty, Message.user("Second question.")]
    await store.create_run(
        "r1", thread_id="t1", owner=OWNER, settings=thread.settings, messages=history
    )

    result = await thread.loop.run("r1")
    assert result.end == RunEnd.COMPLETED, result
    [request] = wire.received
    [sent] = sent_messages(request)
    assert sent["role"] == "user"
    texts = [block["text"] for block in sent["content"]]
    assert texts == ["First question.", "Second question."]
    kept = await store.load_messages("t1")
    assert kept[:3] == history and kept[3] == Message.assistant("Answered.")


def _received(messages: list[dict[str, Any]]) -> Received:
    return Received("POST", "/", {}, json.dumps({"messages": messages}).encode())


def test_the_servers_hold_the_providers_rule() -> None:
    """What the tests above rely on: an empty or blank message is refused, except Anthropic's
    optional final assistant message."""
    a_question: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": "Hi."}]}
    b_question: dict[str, Any] = {"role": "user", "content": [{"text": "Hi."}]}
    for a_content, b_content in (([], []), ([{"type": "text", "text": "  "}], [{"text": " "}])):
        a_middle: list[dict[str, Any]] = [
            a_question,
            {"role": "assistant", "content": a_content},
            a_question,
        ]
        b_middle: list[dict[str, Any]] = [
            b_question,
            {"role": "assistant", "content": b_content},
            b_question,
        ]
        for rules, middle in (
            (anthropic_content_rules, a_middle),
            (bedrock_content_rules, b_middle),
        ):
            refused = rules(_received(middle))
            assert refused is not None and refused.status == 400
    a_final: list[dict[str, Any]] = [a_question, {"role": "assistant", "content": []}]
    b_final: list[dict[str, Any]] = [b_question, {"role": "assistant", "content": []}]
    assert anthropic_content_rules(_received(a_final)) is None
    assert bedrock_content_rules(_received(b_final)) is not None
    assert anthropic_content_rules(_received([a_question])) is None
    assert bedrock_content_rules(_received([b_question])) is None


def test_only_a_turn_with_nothing_to_send_gets_the_notice() -> None:
    from awaken_s3.messages import ProviderBlock, ThinkingBlock, ToolUseBlock
    from awaken_s3.streaming.recovery import never_empty

    thinking = ThinkingBlock(thinking="Nothing to add.", signature="c2ln")
    # Reasoning alone says nothing a request could carry: the notice follows it.
    reasoning_only = Message(role="assistant", content=(thinking, TextBlock(text="\n")))
    assert never_empty(reasoning_only).content == (thinking, TextBlock(text=EMPTY_TURN_NOTICE))
    # A call, a server block (a paused turn is resent as it came) or text is left as it is.
    for content in (
        (ToolUseBlock(id="c1", name="lookup", input={}),),
        (ProviderBlock(provider="anthropic", block={"type": "server_tool_use"}),),
        (thinking, TextBlock(text="Yes.")),
    ):
        message = Message(role="assistant", content=content)
        assert never_empty(message) is message
