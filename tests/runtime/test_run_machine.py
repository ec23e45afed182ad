"""The run's state machine as a table: events in, actions out, no I/O.

Each row feeds a fresh machine a sequence of events (what the driver would report) and checks
the action it answers each with; the last action of most rows is terminal (Exit or Crash).
tests/runtime/test_run_liveness.py drives the same machine through every state and fault.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from awaken_s3.messages import Message, ToolResultBlock, ToolUseBlock
from awaken_s3.runtime.run_machine import (
    MAX_REPAIRS,
    NO_PROGRESS,
    STEP_LIMIT,
    THREAD_MOVED_ON,
    UNKNOWN_AGENT,
    UNKNOWN_TOOL,
    Action,
    CheckFence,
    CheckpointSettled,
    Claim,
    Claimed,
    ClaimRefused,
    ClearTurnCheckpoint,
    Commit,
    Committed,
    ConfirmOwner,
    Crash,
    Event,
    Exit,
    Faulted,
    FenceChecked,
    Finish,
    Finished,
    HistoryLoaded,
    LoadHistory,
    MovedOn,
    OwnerAnswered,
    Phase,
    ReadRun,
    Refused,
    Release,
    Released,
    RunMachine,
    RunProtocolError,
    RunRead,
    RunTools,
    RunTurn,
    SettleCheckpoint,
    ToolsRan,
    TurnCheckpointCleared,
    TurnEnded,
)
from awaken_s3.runtime.run_result import RunEnd
from awaken_s3.streaming.cleanup import Cleared
from awaken_s3.streaming.fate import FencedWriter, RunRecord
from awaken_s3.streaming.outcome import (
    CheckpointStats,
    ClassifiedError,
    TurnCompleted,
    TurnFailed,
    TurnFenced,
    TurnSuspended,
    Usage,
)
from awaken_s3.threads.errors import ThreadNotFound
from awaken_s3.threads.models import Lease, RunSettings, RunStatus
from tests.fixtures.runs import run_state

ME, EPOCH, NOW, DEADLINE = "w1", 3, 1000.0, 500.0
PROMPT = Message.user("add 1 and 2")
CALL = ToolUseBlock(id="c1", name="add", input={"a": 1, "b": 2})
ASKS_TOOL = Message(role="assistant", content=(CALL,))
RESULT = ToolResultBlock(tool_use_id="c1", content="3")


def run(**changes: Any) -> Any:
    """The run as this worker holds it: running at epoch 3, one message, turn 0."""
    fields: dict[str, Any] = {
        "status": RunStatus.RUNNING,
        "lease": Lease(ME, EPOCH, NOW + 60),
        "message_count": 1,
        "settings": RunSettings(model="m", max_turns=3),
    }
    fields.update(changes)
    return run_state(**fields)


THEIRS = run(lease=Lease("w2", EPOCH + 1, NOW + 60))
ENDED = run(status=RunStatus.COMPLETED, lease=Lease(None, EPOCH, 0))
RELEASED = run(status=RunStatus.SUSPENDED, lease=Lease(None, EPOCH, 0))


def machine(**kw: Any) -> RunMachine:
    return RunMachine("r1", ME, 60.0, **kw)


def completed(text: str = "3.", *, tools: bool = False, **kw: Any) -> TurnCompleted:
    message = ASKS_TOOL if tools else Message.assistant(text)
    stop = "tool_use" if tools else "end_turn"
    return TurnCompleted(message, stop, Usage(10, 5), None, checkpoint_version="v1", **kw)


def claimed(**kw: Any) -> list[Step]:
    """The claim and the first history load of a run holding ``PROMPT``."""
    return [
        Step(Claimed(run(**kw), NOW), LoadHistory()),
        Step(HistoryLoaded((PROMPT,), 0.0), RunTurn),
    ]


Expect = type | Action | Callable[[Action], bool]


@dataclass
class Step:
    event: Event
    expect: Expect


def check(action: Action, expect: Expect) -> None:
    if isinstance(expect, type):
        assert isinstance(action, expect), action
    elif callable(expect):  # a predicate (actions are plain data, never callable)
        assert expect(action), action
    else:
        assert action == expect, action


def exits(end: RunEnd, **fields: Any) -> Callable[[Action], bool]:
    def test(action: Action) -> bool:
        if not isinstance(action, Exit) or action.result.end is not end:
            return False
        return all(getattr(action.result, k) == v for k, v in fields.items())

    return test


def finishes(status: RunStatus, code: str | None = None) -> Callable[[Action], bool]:
    def test(action: Action) -> bool:
        if not isinstance(action, Finish) or action.status is not status:
            return False
        return code is None or (action.error is not None and action.error.code == code)

    return test


def fenced_after(steps: Sequence[Step]) -> list[Step]:
    """A fence the run record confirms: the fenced worker's own object, then Exit fenced."""
    return [
        *steps,
        Step(FenceChecked(THEIRS), SettleCheckpoint(FencedWriter(ME, EPOCH))),
        Step(CheckpointSettled(False), exits(RunEnd.FENCED, run=THEIRS)),
    ]


ROWS: dict[str, tuple[Callable[[], RunMachine], list[Step]]] = {
    "a run whose last turn completes: commit with the end, delete its checkpoint, exit": (
        machine,
        [
            *claimed(),
            Step(
                TurnEnded(completed()),
                lambda a: isinstance(a, Commit) and a.commit.final_status is not None,
            ),
            Step(Committed(ENDED), ClearTurnCheckpoint(0, "t1", completed())),
            Step(
                TurnCheckpointCleared(Cleared.GONE),
                exits(RunEnd.COMPLETED, turns_committed=1, checkpoint_left=False),
            ),
        ],
    ),
    "a run held by a live lease is busy until that lease runs out": (
        machine,
        [Step(ClaimRefused(THEIRS, NOW, "held"), exits(RunEnd.BUSY, retry_after=60.0))],
    ),
    "an ended run's leftover checkpoint is settled first, then not_runnable": (
        machine,
        [
            Step(ClaimRefused(ENDED, NOW, "ended"), SettleCheckpoint(RunRecord(ENDED))),
            Step(CheckpointSettled(True), exits(RunEnd.NOT_RUNNABLE, checkpoint_left=True)),
        ],
    ),
    "a dead holder's run reports how long it waited": (
        machine,
        [
            Step(Claimed(run(previous_lease_until=NOW - 10), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT,), 0.0), RunTurn),
            Step(TurnEnded(TurnSuspended(None, 0, new_chars=5)), Release(0)),
            Step(Released(RELEASED), exits(RunEnd.SUSPENDED, resume_delay=70.0)),
        ],
    ),
    "an agent removed by a deploy fails the run before its history is read": (
        machine,
        [
            Step(
                Claimed(run(), NOW, agent_problem="gone"), finishes(RunStatus.FAILED, UNKNOWN_AGENT)
            ),
            Step(Finished(run(status=RunStatus.FAILED)), SettleCheckpoint),
            Step(CheckpointSettled(False), exits(RunEnd.FAILED)),
        ],
    ),
    "a run whose thread has no messages crashes, releasing its lease": (
        machine,
        [
            Step(Claimed(run(), NOW), LoadHistory()),
            Step(
                HistoryLoaded((), 0.0),
                lambda a: (
                    isinstance(a, Crash) and a.release and isinstance(a.error, ThreadNotFound)
                ),
            ),
        ],
    ),
    "another epoch at a step is checked against the run record and obeyed": (
        machine,
        fenced_after(
            [
                *claimed(),
                Step(TurnEnded(completed(tools=True)), Commit),
                Step(Committed(run(turn=1, message_count=2)), ClearTurnCheckpoint),
                Step(TurnCheckpointCleared(Cleared.GONE), ReadRun()),
                Step(RunRead(THEIRS, 0.0), CheckFence),
            ]
        ),
    ),
    "a lost lease at a step whose run record still says ours hands the run over": (
        machine,
        [
            Step(Claimed(run(), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT,), 0.0, lease_lost=True), CheckFence),
            Step(FenceChecked(run()), Release(1)),
            Step(Released(RELEASED), exits(RunEnd.SUSPENDED)),
        ],
    ),
    "a fence whose run record cannot be read exits with no run to trust": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(None), CheckFence),
            Step(FenceChecked(None), SettleCheckpoint(FencedWriter(ME, EPOCH))),
            Step(CheckpointSettled(False), exits(RunEnd.FENCED, run=None)),
        ],
    ),
    "a run cancelled by the API is finished as cancelled at the next step": (
        machine,
        [
            Step(Claimed(run(status=RunStatus.CANCELLED), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT,), 0.0), finishes(RunStatus.CANCELLED)),
            Step(Finished(run(status=RunStatus.CANCELLED)), SettleCheckpoint),
            Step(CheckpointSettled(False), exits(RunEnd.CANCELLED, error=None)),
        ],
    ),
    "a turn abandoned for a cancel reads the run, which the step then finishes cancelled": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(None, cancelled=True), ReadRun()),
            Step(RunRead(run(status=RunStatus.CANCELLED), 0.0), finishes(RunStatus.CANCELLED)),
            Step(Finished(run(status=RunStatus.CANCELLED)), SettleCheckpoint),
            Step(CheckpointSettled(False), exits(RunEnd.CANCELLED, error=None)),
        ],
    ),
    "a turn fenced by the cancel's mark reads the run (no owner check, no hand-over)": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(TurnFenced("the cancel's mark"), cancelled=True), ReadRun()),
            Step(RunRead(run(status=RunStatus.CANCELLED), 0.0), finishes(RunStatus.CANCELLED)),
            Step(Finished(run(status=RunStatus.CANCELLED)), SettleCheckpoint),
            Step(CheckpointSettled(False), exits(RunEnd.CANCELLED, error=None)),
        ],
    ),
    "tools abandoned for a cancel read the run too (never a fence check)": (
        machine,
        [
            Step(Claimed(run(message_count=2), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT, ASKS_TOOL), 0.0), RunTools),
            Step(ToolsRan(None, cancelled=True), ReadRun()),
            Step(RunRead(run(status=RunStatus.CANCELLED), 0.0), finishes(RunStatus.CANCELLED)),
        ],
    ),
    "a history behind the run is read again before deciding": (
        machine,
        [
            Step(Claimed(run(message_count=2), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT,), 0.0), LoadHistory()),
            Step(HistoryLoaded((PROMPT, ASKS_TOOL), 0.0), RunTools((CALL,), run(message_count=2))),
        ],
    ),
    "a spent token budget fails the run": (
        machine,
        [
            Step(
                Claimed(
                    run(usage=Usage(90, 20), settings=RunSettings(model="m", token_budget=100)),
                    NOW,
                ),
                LoadHistory(),
            ),
            Step(HistoryLoaded((PROMPT,), 0.0), finishes(RunStatus.FAILED, "budget_exhausted")),
        ],
    ),
    "tool calls without results run, their results are committed, the run is read again": (
        machine,
        [
            Step(Claimed(run(message_count=2), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT, ASKS_TOOL), 0.0), RunTools),
            Step(
                ToolsRan((RESULT,)),
                lambda a: isinstance(a, Commit) and not a.commit.advance_turn,
            ),
            Step(Committed(run(message_count=3)), ReadRun()),
            Step(RunRead(run(message_count=3), 0.0), RunTurn),
        ],
    ),
    "tool calls past the deadline are left for the next invocation": (
        lambda: machine(deadline=DEADLINE),
        [
            Step(Claimed(run(message_count=2), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT, ASKS_TOOL), DEADLINE), Release(1)),
        ],
    ),
    "a call the deadline kept from starting hands the run over (progress made)": (
        machine,
        [
            Step(Claimed(run(message_count=2), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT, ASKS_TOOL), 0.0), RunTools),
            Step(ToolsRan((RESULT, None)), Release(0)),
        ],
    ),
    "a tool call the run cannot get past (a mismatched record, time-outs) fails the run": (
        machine,
        [
            Step(Claimed(run(message_count=2), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT, ASKS_TOOL), 0.0), RunTools),
            Step(
                ToolsRan(None, failed=ClassifiedError("tool_timed_out", "3 times", False)),
                finishes(RunStatus.FAILED, "tool_timed_out"),
            ),
        ],
    ),
    "a tool claim another epoch refused is checked against the run record": (
        machine,
        fenced_after(
            [
                Step(Claimed(run(message_count=2), NOW), LoadHistory()),
                Step(HistoryLoaded((PROMPT, ASKS_TOOL), 0.0), RunTools),
                Step(ToolsRan(None, refused="claimed by epoch 4"), CheckFence),
            ]
        ),
    ),
    "the step limit fails the run": (
        machine,
        [
            Step(Claimed(run(turn=3), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT,), 0.0), finishes(RunStatus.FAILED, STEP_LIMIT)),
        ],
    ),
    "too late for a model turn: the run is handed over": (
        lambda: machine(deadline=DEADLINE),
        [
            Step(Claimed(run(), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT,), DEADLINE + 1), Release(1)),
        ],
    ),
    "within the turn headroom a fresh invocation still runs a turn...": (
        lambda: machine(deadline=DEADLINE, turn_headroom=40),
        [
            Step(Claimed(run(), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT,), DEADLINE - 10), RunTurn),
        ],
    ),
    "... but one that made progress hands over instead": (
        lambda: machine(deadline=DEADLINE, turn_headroom=40),
        [
            Step(Claimed(run(message_count=2), NOW), LoadHistory()),
            Step(HistoryLoaded((PROMPT, ASKS_TOOL), 0.0), RunTools),
            Step(ToolsRan((RESULT,)), Commit),
            Step(Committed(run(message_count=3)), ReadRun()),
            Step(RunRead(run(message_count=3), DEADLINE - 10), Release(0)),
        ],
    ),
    "a tool the worker does not have fails the run when a turn would send it": (
        machine,
        [
            Step(Claimed(run(), NOW, tools_problem="no tool 'x'"), LoadHistory()),
            Step(HistoryLoaded((PROMPT,), 0.0), finishes(RunStatus.FAILED, UNKNOWN_TOOL)),
        ],
    ),
    "a run that keeps handing over without progress fails": (
        lambda: machine(max_idle_suspensions=3),
        [
            *claimed(idle_suspensions=2),
            Step(TurnEnded(TurnSuspended(None, 0)), finishes(RunStatus.FAILED, NO_PROGRESS)),
        ],
    ),
    "a turn fence the run record denies is believed": (
        machine,
        fenced_after(
            [
                *claimed(),
                Step(TurnEnded(TurnFenced("412")), ConfirmOwner()),
                Step(OwnerAnswered(False), CheckFence("412")),
            ]
        ),
    ),
    "a turn fence the run record says is wrong: the turn runs again from what is stored": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(TurnFenced("412")), ConfirmOwner()),
            Step(OwnerAnswered(True), ReadRun()),
            Step(RunRead(run(), 0.0), RunTurn),
        ],
    ),
    "a failed turn fails the run with its classified error": (
        machine,
        [
            *claimed(),
            Step(
                TurnEnded(TurnFailed(ClassifiedError("context_overflow", "long", False))),
                finishes(RunStatus.FAILED, "context_overflow"),
            ),
        ],
    ),
    "a commit the run record refused is believed: no hand-over even if it reads ours": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(completed()), Commit),
            Step(Refused("fenced"), CheckFence("fenced")),
            Step(FenceChecked(run()), SettleCheckpoint(FencedWriter(ME, EPOCH))),
        ],
    ),
    "a commit that found the thread moved on fails the run with thread_moved_on": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(completed()), Commit),
            Step(MovedOn("another run"), ReadRun()),
            Step(RunRead(run(), 0.0), finishes(RunStatus.FAILED, THREAD_MOVED_ON)),
        ],
    ),
    "... or as cancelled when the API cancelled it": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(completed()), Commit),
            Step(MovedOn("cancelled"), ReadRun()),
            Step(RunRead(run(status=RunStatus.CANCELLED), 0.0), finishes(RunStatus.CANCELLED)),
        ],
    ),
    "the next turn does not read a checkpoint this invocation deleted": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(completed(tools=True)), Commit),
            Step(Committed(run(turn=1, message_count=2)), ClearTurnCheckpoint),
            Step(TurnCheckpointCleared(Cleared.GONE), ReadRun()),
            Step(RunRead(run(turn=1, message_count=2), 0.0), RunTools),
            Step(ToolsRan((RESULT,)), Commit),
            Step(Committed(run(turn=1, message_count=3)), ReadRun()),
            Step(
                RunRead(run(turn=1, message_count=3), 0.0),
                lambda a: isinstance(a, RunTurn) and not a.read_checkpoint,
            ),
        ],
    ),
    "a final checkpoint rewritten meanwhile is judged as the ended run's": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(completed()), Commit),
            Step(Committed(ENDED), ClearTurnCheckpoint),
            Step(TurnCheckpointCleared(Cleared.REWRITTEN), SettleCheckpoint(RunRecord(ENDED))),
            Step(CheckpointSettled(True), exits(RunEnd.COMPLETED, checkpoint_left=True)),
        ],
    ),
    "a newer build's checkpoint left alone during the last turn is reported left": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(completed(checkpoint_stats=CheckpointStats(newer_schema=1))), Commit),
            Step(Committed(ENDED), ClearTurnCheckpoint),
            Step(
                TurnCheckpointCleared(Cleared.GONE), exits(RunEnd.COMPLETED, checkpoint_left=True)
            ),
        ],
    ),
    "a refusal of the turn commits it and fails the run": (
        machine,
        [
            *claimed(),
            Step(
                TurnEnded(TurnCompleted(Message.assistant("No."), "refusal", Usage(), None)),
                lambda a: isinstance(a, Commit) and a.commit.final_status is RunStatus.FAILED,
            ),
            Step(Committed(run(status=RunStatus.FAILED)), ClearTurnCheckpoint),
            Step(TurnCheckpointCleared(Cleared.GONE), exits(RunEnd.FAILED)),
        ],
    ),
    "a release the run record refused is believed": (
        machine,
        fenced_after(
            [
                *claimed(),
                Step(TurnEnded(TurnSuspended(None, 0, new_chars=3)), Release(0)),
                Step(Refused("lease lost"), CheckFence("lease lost")),
            ]
        ),
    ),
    "a run cancelled while it was handed over has its partial deleted": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(TurnSuspended(None, 0, new_chars=3)), Release(0)),
            Step(Released(run(status=RunStatus.CANCELLED)), SettleCheckpoint),
            Step(CheckpointSettled(False), exits(RunEnd.CANCELLED)),
        ],
    ),
    "a fault before the claim crashes without a release": (
        machine,
        [Step(Faulted(), Crash(release=False))],
    ),
    "a fault while the lease is ours releases it": (
        machine,
        [*claimed(), Step(Faulted(), Crash(release=True))],
    ),
    "a fault after the run ended releases nothing": (
        machine,
        [
            *claimed(),
            Step(TurnEnded(completed()), Commit),
            Step(Committed(ENDED), ClearTurnCheckpoint),
            Step(Faulted(), Crash(release=False)),
        ],
    ),
}


@pytest.mark.parametrize("row", list(ROWS), ids=list(ROWS))
def test_transition_table(row: str) -> None:
    make, steps = ROWS[row]
    m = make()
    assert m.start() == Claim()
    for step in steps:
        check(m.send(step.event), step.expect)


def test_repairs_are_bounded() -> None:
    m = machine()
    for step in claimed():
        m.send(step.event)
    for _ in range(MAX_REPAIRS):
        assert m.send(TurnEnded(TurnFenced("412"))) == ConfirmOwner()
        assert m.send(OwnerAnswered(True)) == ReadRun()
        assert isinstance(m.send(RunRead(run(), 0.0)), RunTurn)
    assert m.send(TurnEnded(TurnFenced("412"))) == CheckFence("412")


def test_an_event_the_phase_does_not_expect_is_a_protocol_error() -> None:
    m = machine()
    with pytest.raises(RunProtocolError):
        m.send(RunRead(run(), 0.0))
    m.send(Claimed(run(), NOW))
    with pytest.raises(RunProtocolError):
        m.send(ToolsRan(()))
    m.send(Faulted())
    assert m.phase is Phase.DONE
    with pytest.raises(RunProtocolError):
        m.send(Faulted())
