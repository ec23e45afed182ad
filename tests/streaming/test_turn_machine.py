"""The turn's state machine as a table: events in, actions out, no I/O.

Each row feeds a fresh machine a sequence of events (what the driver would report) and
checks the action it answers each with. The stream itself is folded into ``machine.acc`` by
the test, as the driver's hot loop does.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from awaken_s3.messages import Message
from awaken_s3.models import PartialToolCall, StoredCheckpoint, StreamCheckpoint
from awaken_s3.streaming.continuation import CONTINUE_INSTRUCTION
from awaken_s3.streaming.errors import ConnectionDropped, InvalidRequest, PrefillRejected, Throttled
from awaken_s3.streaming.events import StopEvent, TextDelta, ToolCallDelta, ToolCallStart
from awaken_s3.streaming.fence import CANCEL_WRITER
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.turn_machine import (
    COMPLETED,
    DEADLINE,
    FENCED,
    Action,
    AttemptEnded,
    CallModel,
    Complete,
    ConfirmOwner,
    Event,
    Fail,
    Fence,
    Flush,
    Flushed,
    Load,
    Loaded,
    Opened,
    OpenWriter,
    OwnerAnswered,
    Phase,
    Sleep,
    Slept,
    Suspend,
    TurnMachine,
    TurnProtocolError,
)

REQUEST = ModelRequest(model="m", messages=(Message.user("question"),))
NOW = 100.0


def machine(*, prefill: bool = True, deadline: float | None = None, budget: int = 5) -> TurnMachine:
    return TurnMachine(
        run_id="run-1",
        thread_id="thread-1",
        turn=0,
        epoch=3,
        writer_id="w",
        request=REQUEST,
        prefill=prefill,
        policy=RetryPolicy(max_interruptions=budget, base_delay=1.0, max_delay=1.0),
        rng=random.Random(1),
        deadline=deadline,
    )


def stored(**fields: object) -> StoredCheckpoint:
    base: dict[str, object] = {"run_id": "run-1", "thread_id": "thread-1", "model": "m", "turn": 0}
    base.update(fields)
    return StoredCheckpoint(checkpoint=StreamCheckpoint(**base), version="v1")


def streamed(*events: object) -> Callable[[TurnMachine], None]:
    """Fold stream events into the machine's partial turn, as the driver's hot loop does."""

    def fold(m: TurnMachine) -> None:
        for event in events:
            m.acc.apply(event)  # type: ignore[arg-type]

    return fold


@dataclass
class Step:
    event: Event
    expect: type[Action] | Action
    #: what the stream produced before this event was reported
    before: Callable[[TurnMachine], None] | None = None


def run_steps(m: TurnMachine, first: type[Action] | Action, steps: Sequence[Step]) -> list[Action]:
    actions = [m.start()]
    check(actions[0], first)
    for step in steps:
        if step.before is not None:
            step.before(m)
        action = m.send(step.event)
        check(action, step.expect)
        actions.append(action)
    return actions


def check(action: Action, expect: type[Action] | Action) -> None:
    if isinstance(expect, type):
        assert isinstance(action, expect), action
    else:
        assert action == expect, action


FRESH = OpenWriter(version=None, version_known=True, checkpointing=True, write_first=False)

ROWS: dict[str, tuple[Callable[[], TurnMachine], list[Step]]] = {
    "a fresh turn streams, settles and completes": (
        machine,
        [
            Step(Loaded(None), FRESH),
            Step(Opened(False, NOW), CallModel(REQUEST)),
            Step(
                AttemptEnded(COMPLETED, NOW),
                Flush(write=False),
                streamed(TextDelta("Hi."), StopEvent("end_turn")),
            ),
            Step(Flushed(False, NOW), Complete),
        ],
    ),
    "a checkpoint from a newer epoch is obeyed when the run record denies us": (
        machine,
        [
            Step(Loaded(stored(partial_text="theirs", epoch=9)), ConfirmOwner()),
            Step(OwnerAnswered(False), Fence),
        ],
    ),
    "... and replaced when the run record says we hold the run": (
        machine,
        [
            Step(Loaded(stored(partial_text="Saved text", epoch=9)), ConfirmOwner()),
            Step(
                OwnerAnswered(True),
                OpenWriter(version="v1", version_known=True, checkpointing=True, write_first=True),
            ),
        ],
    ),
    "the API's cancel mark at the turn's start (the cancel came after the run's last read) "
    "is never resumed from: the run record, finding the run cancelled, fences the turn": (
        machine,
        [
            Step(Loaded(stored(writer=CANCEL_WRITER, epoch=3)), ConfirmOwner()),
            Step(OwnerAnswered(False), Fence),
        ],
    ),
    "a resume writes its new retry count first, and is fenced if that write loses": (
        machine,
        [
            Step(Loaded(stored(partial_text="Saved text")), OpenWriter),
            Step(Opened(True, NOW), Fence),
        ],
    ),
    "R2 at load completes without a model call": (
        machine,
        [
            Step(
                Loaded(
                    stored(
                        partial_text="Calling.",
                        tool_calls=(PartialToolCall(index=0, id="c1", name="t", arguments="{}"),),
                    )
                ),
                Complete,
            )
        ],
    ),
    "a resume past the budget fails without a model call": (
        lambda: machine(budget=2),
        [Step(Loaded(stored(partial_text="Saved", retry_count=2)), Fail)],
    ),
    "a stale checkpoint of another turn is never replayed, only replaced": (
        machine,
        [
            Step(
                Loaded(stored(partial_text="old", turn=4)),
                OpenWriter(
                    version="v1", version_known=False, checkpointing=True, write_first=False
                ),
            )
        ],
    ),
    "a newer build's checkpoint turns checkpointing off for the turn": (
        machine,
        [
            Step(
                Loaded(None, checkpointing=False),
                OpenWriter(
                    version=None, version_known=True, checkpointing=False, write_first=False
                ),
            )
        ],
    ),
    "the deadline before a call suspends with a forced flush": (
        lambda: machine(deadline=NOW),
        [
            Step(Loaded(None), FRESH),
            Step(Opened(False, NOW), Flush(write=True, force=True)),
            Step(Flushed(False, NOW), Suspend()),
        ],
    ),
    "the deadline during a stream suspends too; a fenced suspension is a fence": (
        machine,
        [
            Step(Loaded(None), FRESH),
            Step(Opened(False, NOW), CallModel),
            Step(AttemptEnded(DEADLINE, NOW), Flush(write=True, force=True)),
            Step(Flushed(True, NOW), Fence),
        ],
    ),
    "a lost condition mid-stream is a fence": (
        machine,
        [
            Step(Loaded(None), FRESH),
            Step(Opened(False, NOW), CallModel),
            Step(AttemptEnded(FENCED, NOW), Fence),
        ],
    ),
    "a dropped stream is planned like a crash, flushed, slept on, and continued": (
        machine,
        [
            Step(Loaded(None), FRESH),
            Step(Opened(False, NOW), CallModel),
            Step(
                AttemptEnded(ConnectionDropped("cut"), NOW),
                Flush(write=True, force=True),
                streamed(TextDelta("Half an ")),
            ),
            Step(Flushed(False, NOW), Sleep),
            Step(Slept(NOW + 1), CallModel),
        ],
    ),
    "a backoff that would cross the deadline suspends instead": (
        lambda: machine(deadline=NOW + 0.5),
        [
            Step(Loaded(None), FRESH),
            Step(Opened(False, NOW), CallModel),
            Step(AttemptEnded(Throttled("slow down", retry_after=30.0), NOW), Flush),
            Step(Flushed(False, NOW), Flush(write=True, force=True)),
            Step(Flushed(False, NOW), Suspend()),
        ],
    ),
    "an interruption past the budget fails after recording it": (
        lambda: machine(budget=0),
        [
            Step(Loaded(None), FRESH),
            Step(Opened(False, NOW), CallModel),
            Step(AttemptEnded(ConnectionDropped("cut"), NOW), Flush(write=True, force=True)),
            Step(Flushed(False, NOW), Fail),
        ],
    ),
    "an interruption with complete calls saved completes as R2 in process": (
        machine,
        [
            Step(Loaded(None), FRESH),
            Step(Opened(False, NOW), CallModel),
            Step(
                AttemptEnded(ConnectionDropped("cut"), NOW),
                Flush(write=True, force=True),
                streamed(
                    TextDelta("Using a tool."),
                    ToolCallStart(0, "c1", "t"),
                    ToolCallDelta(0, '{"a": 1}'),
                ),
            ),
            Step(Flushed(False, NOW), Complete),
        ],
    ),
    "a tool-use stop without one complete call is an interruption, never an answer": (
        machine,
        [
            Step(Loaded(None), FRESH),
            Step(Opened(False, NOW), CallModel),
            Step(
                AttemptEnded(COMPLETED, NOW),
                Flush(write=True, force=True),
                streamed(TextDelta("Hm."), ToolCallStart(0, "c1", "t"), StopEvent("tool_use")),
            ),
        ],
    ),
    "a permanent error flushes what is unsaved and fails": (
        machine,
        [
            Step(Loaded(None), FRESH),
            Step(Opened(False, NOW), CallModel),
            Step(AttemptEnded(InvalidRequest("bad"), NOW), Flush(write=True, force=False)),
            Step(Flushed(True, NOW), Fail),
        ],
    ),
}


@pytest.mark.parametrize("row", list(ROWS), ids=list(ROWS))
def test_transition_table(row: str) -> None:
    make, steps = ROWS[row]
    m = make()
    run_steps(m, Load, steps)
    last = steps[-1].expect
    terminal = (Complete, Suspend, Fail, Fence)
    is_terminal = isinstance(last, terminal) or (
        isinstance(last, type) and issubclass(last, terminal)
    )
    assert (m.phase is Phase.DONE) == is_terminal


def test_a_resume_continues_the_saved_text_in_the_request() -> None:
    m = machine(prefill=False)
    run_steps(
        m,
        Load,
        [
            Step(Loaded(stored(partial_text="The saved text ")), OpenWriter),
        ],
    )
    call = m.send(Opened(False, NOW))
    assert isinstance(call, CallModel)
    assert [msg.text for msg in call.request.messages] == [
        "question",
        "The saved text",
        CONTINUE_INSTRUCTION,
    ]
    assert (m.plan_kind, m.retry_count) == ("R1", 1)


def test_a_rejected_prefill_is_retried_at_once_in_the_continue_form_for_free() -> None:
    m = machine(prefill=True)
    run_steps(m, Load, [Step(Loaded(stored(partial_text="Saved text")), OpenWriter)])
    assert isinstance(m.send(Opened(False, NOW)), CallModel)
    again = m.send(AttemptEnded(PrefillRejected("no prefill"), NOW))
    assert isinstance(again, CallModel)
    assert again.request.messages[-1].text == CONTINUE_INSTRUCTION
    assert m.retry_count == 1  # the resume's, nothing for the rejection


def test_an_event_the_phase_does_not_expect_is_a_protocol_error() -> None:
    m = machine()
    with pytest.raises(TurnProtocolError):
        m.send(Opened(False, NOW))
    m.start()
    m.send(Loaded(None))
    with pytest.raises(TurnProtocolError):
        m.send(Slept(NOW))
