"""The history a request sends: mended after runs that ended early, never in the thread."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from awaken_s3.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from awaken_s3.runtime.history import NOT_RUN, request_messages

CALL = ToolUseBlock(id="c1", name="lookup", input={"q": "x"})


def test_a_healthy_history_is_sent_as_it_is() -> None:
    history = (
        Message.user("hi"),
        Message(role="assistant", content=(TextBlock(text="looking"), CALL)),
        Message(role="user", content=(ToolResultBlock(tool_use_id="c1", content="found"),)),
        Message.assistant("done"),
    )
    assert request_messages(history) == history


def test_a_failed_run_s_message_and_the_next_one_are_sent_as_one() -> None:
    history = [Message.user("first question"), Message.user("second question")]
    assert request_messages(history) == (
        Message(
            role="user",
            content=(TextBlock(text="first question"), TextBlock(text="second question")),
        ),
    )


def test_calls_left_without_results_get_an_error_result_before_the_next_message() -> None:
    two = ToolUseBlock(id="c2", name="lookup", input={})
    history = [
        Message.user("hi"),
        Message(role="assistant", content=(CALL, two)),
        # The run ended here (a step limit); the next run's message follows.
        Message.user("again"),
    ]
    [_, _, mended] = request_messages(history)
    assert mended.content == (
        ToolResultBlock(tool_use_id="c1", content=NOT_RUN, is_error=True),
        ToolResultBlock(tool_use_id="c2", content=NOT_RUN, is_error=True),
        TextBlock(text="again"),
    )


def test_a_partly_answered_turn_gets_results_for_the_rest_only_and_results_come_first() -> None:
    two = ToolUseBlock(id="c2", name="lookup", input={})
    answered = Message(role="user", content=(ToolResultBlock(tool_use_id="c1", content="ok"),))
    history = [Message.user("hi"), Message(role="assistant", content=(CALL, two)), answered]
    [_, _, mended] = request_messages(history)
    assert [getattr(b, "tool_use_id", None) for b in mended.content] == ["c2", "c1"]


def test_the_run_s_own_pending_calls_are_left_for_the_loop() -> None:
    history = (Message.user("hi"), Message(role="assistant", content=(CALL,)))
    assert request_messages(history) == history


def test_an_empty_assistant_message_is_left_out_and_the_user_messages_around_it_sent_as_one() -> (
    None
):
    for empty in ((), (TextBlock(text=""), TextBlock(text=" \n"))):
        history = (
            Message.user("first question"),
            Message(role="assistant", content=empty),
            Message.user("second question"),
        )
        assert request_messages(history) == (
            Message(
                role="user",
                content=(TextBlock(text="first question"), TextBlock(text="second question")),
            ),
        )


roles = st.lists(
    st.sampled_from(["user", "assistant", "assistant-tools", "assistant-empty", "assistant-blank"]),
    max_size=12,
)


@given(roles)
def test_whatever_the_history_roles_alternate_and_every_call_has_a_result(kinds: list[str]) -> None:
    history = []
    for i, kind in enumerate(kinds):
        if kind == "user":
            history.append(Message.user(f"u{i}"))
        elif kind == "assistant":
            history.append(Message.assistant(f"a{i}"))
        elif kind == "assistant-empty":
            history.append(Message(role="assistant", content=()))
        elif kind == "assistant-blank":
            history.append(Message.assistant("  \n"))
        else:
            call = ToolUseBlock(id=f"c{i}", name="t", input={})
            history.append(Message(role="assistant", content=(call,)))
    sent = request_messages(history)
    users = [m for m in sent if m.role == "user"]
    assert all(a.role != b.role or a.role == "assistant" for a, b in itertools.pairwise(sent))
    # No message reaches a provider with nothing to send.
    assert all(any(not isinstance(b, TextBlock) or b.text.strip() for b in m.content) for m in sent)
    for i, message in enumerate(sent[:-1]):
        for call in message.tool_uses:
            following = sent[i + 1]
            assert following.role == "user"
            assert call.id in {getattr(b, "tool_use_id", None) for b in following.content}
    # Nothing the caller wrote is lost or reordered.
    texts = [b.text for m in users for b in m.content if isinstance(b, TextBlock)]
    assert texts == [f"u{i}" for i, kind in enumerate(kinds) if kind == "user"]
