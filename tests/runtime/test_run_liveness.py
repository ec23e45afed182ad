"""The liveness rule as a property of the run machine (hypothesis; no I/O).

"Every way out of an invocation leaves the run ended, or with its lease released and a
message that will drive it, or owned by a live newer epoch." A small model of the run record
answers the machine's actions the way the stores do: writes conditional on the epoch, a
commit conditional on the run's status and counts, the API cancelling at any moment, other
workers claiming an expired lease and then releasing or ending the run, leases running out,
reads that fail, and any action raising, before or after its write landed. Hypothesis chooses
the world's answers; the machine decides. At its terminal action the test does what the
worker's handler does with the queue record (:func:`awaken_s3.service.dispositions.disposition`:
acknowledge, send a continuation, or keep the record) and checks the rule against the world:

* the run ended; or
* a message will drive it: the record is kept (a crash fails it too), or a continuation is
  sent for a run whose lease is no longer this invocation's; or
* the record is acknowledged because another epoch took the run after this one: that
  epoch's own record (or the message whoever released it sent) drives it.

Acknowledging a run that this invocation's epoch still holds, or that it released without a
continuation, strands it: that is what the property forbids. The same walks, from fixed
seeds, must reach every row of the machine's transition table.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken_s3.messages import Message, ToolResultBlock, ToolUseBlock
from awaken_s3.runtime import run_machine as rm
from awaken_s3.runtime.run_result import RunEnd
from awaken_s3.service.dispositions import Action, disposition
from awaken_s3.streaming.cleanup import Cleared
from awaken_s3.streaming.outcome import (
    CheckpointStats,
    ClassifiedError,
    TurnCompleted,
    TurnFailed,
    TurnFenced,
    TurnSuspended,
    Usage,
)
from awaken_s3.threads.models import Lease, RunSettings, RunState, RunStatus
from tests.fixtures.runs import run_state

ME, OTHER = "me", "other"
LEASE = 60.0
#: the wall clock (leases) and the monotonic clock (the deadline) of the invocation
NOW, DEADLINE = 10_000.0, 100.0
SETTINGS = RunSettings(model="m", max_turns=3, tools=("add",), token_budget=400)
PROMPT = Message.user("add 1 and 2")
CALL = ToolUseBlock(id="c1", name="add", input={"a": 1, "b": 2})
RESULT = ToolResultBlock(tool_use_id="c1", content="3")
#: the most steps one invocation takes in these walks (turns, tools, repairs are bounded)
MAX_STEPS = 200

T = TypeVar("T")
Choose = Callable[[Sequence[T]], T]


class Fault(Exception):
    """What an action raised (a store outage, a lost response)."""


@dataclass
class World:
    """The run record, and which epoch this invocation claimed."""

    status: RunStatus = RunStatus.QUEUED
    epoch: int = 0
    owner: str | None = None
    live: bool = False
    turn: int = 0
    history: list[Message] = field(default_factory=lambda: [PROMPT])
    idle: int = 0
    usage: Usage = field(default_factory=Usage)
    ours: int | None = None

    def view(self) -> RunState:
        until = NOW + LEASE if self.live else (NOW - 1.0 if self.owner else 0.0)
        return run_state(
            status=self.status,
            lease=Lease(self.owner, self.epoch, until),
            turn=self.turn,
            message_count=len(self.history),
            idle_suspensions=self.idle,
            usage=self.usage,
            settings=SETTINGS,
        )

    @property
    def ours_now(self) -> bool:
        """The run's epoch is still the one this invocation claimed."""
        return self.ours is not None and self.epoch == self.ours

    @property
    def held_by_us(self) -> bool:
        return self.ours_now and self.owner == ME

    def give_up(self, status: RunStatus) -> None:
        """A release or finish by our epoch; a cancel that landed meanwhile wins."""
        self.owner, self.live = None, False
        if not self.status.terminal:
            self.status = status


def interfere(world: World, choose: Choose[str]) -> None:
    """What others do between two of the invocation's requests."""
    kinds = ("none", "none", "none", "none", "expire", "steal", "takeover", "release", "end")
    match choose((*kinds, "cancel")):
        case "expire":
            world.live = False
        case "steal" if world.status.runnable:  # ours ran out, and another worker took it
            world.epoch, world.owner, world.live = world.epoch + 1, OTHER, True
            world.status = RunStatus.RUNNING
        case "takeover" if world.status.runnable and (world.owner is None or not world.live):
            world.epoch, world.owner, world.live = world.epoch + 1, OTHER, True
            world.status = RunStatus.RUNNING
        case "release" if world.owner == OTHER:
            world.give_up(RunStatus.SUSPENDED)
        case "end" if world.owner == OTHER:
            world.give_up(RunStatus.COMPLETED)
        case "cancel" if world.status.runnable:
            world.status = RunStatus.CANCELLED


def now_for(choose: Choose[float]) -> float:
    return choose((0.0, 0.0, DEADLINE - 5.0, DEADLINE + 1.0))


def lost(world: World, choose: Choose[bool]) -> bool:
    """Whether the lease keeper noticed a lost lease (only when it is not held and live)."""
    return not (world.held_by_us and world.live) and choose((False, True))


def turn_outcome(world: World, choose: Choose[Any]) -> Any:
    kinds = ["suspended", "fenced", "failed", "final", "tools", "refusal", "stale-schema"]
    if not (world.held_by_us and world.live):
        kinds.append("lost")
    match choose(kinds):
        case "lost":
            return None
        case "suspended":
            return TurnSuspended(None, 0, new_chars=choose((0, 7)))
        case "fenced":
            return TurnFenced("a conditional put lost")
        case "failed":
            return TurnFailed(ClassifiedError("context_overflow", "too long", retryable=False))
        case "tools":
            message = Message(role="assistant", content=(CALL,))
            return TurnCompleted(message, "tool_use", Usage(100, 50), None, checkpoint_version="v")
        case "refusal":
            return TurnCompleted(Message.assistant("No."), "refusal", Usage(10, 1), None)
        case kind:
            stats = CheckpointStats(newer_schema=1) if kind == "stale-schema" else CheckpointStats()
            message = Message.assistant("3.")
            return TurnCompleted(message, "end_turn", Usage(100, 50), None, checkpoint_stats=stats)


def commit(world: World, action: rm.Commit) -> rm.Event:
    change = action.commit
    if not world.ours_now:
        return rm.Refused("the run is at another epoch")
    base = change.base
    if (
        world.status != RunStatus.RUNNING
        or base.message_count != len(world.history)
        or base.turn != world.turn
    ):
        return rm.MovedOn("the thread moved on")
    world.history.extend(change.messages)
    world.turn += 1 if change.advance_turn else 0
    world.usage = world.usage + change.usage
    if change.final_status is not None:
        world.give_up(change.final_status)
    return rm.Committed(world.view())


def write(world: World, action: rm.Action, choose: Choose[Any]) -> rm.Event:
    """Perform a write on the run record, as the stores' conditions allow it."""
    match action:
        case rm.Claim():
            if not world.status.runnable or (world.owner is not None and world.live):
                return rm.ClaimRefused(world.view(), NOW, "held or ended")
            world.epoch, world.owner, world.live, world.status = (
                world.epoch + 1,
                ME,
                True,
                RunStatus.RUNNING,
            )
            world.ours = world.epoch
            problem = choose((None, None, None, None, "agent", "tool"))
            return rm.Claimed(
                world.view(),
                NOW,
                agent_problem="no such agent" if problem == "agent" else None,
                tools_problem="no tool 'add'" if problem == "tool" else None,
            )
        case rm.Commit():
            return commit(world, action)
        case rm.Finish() | rm.Release():
            released = world.owner is None and world.ours_now  # a retry of one that landed
            if not world.held_by_us and not released:
                return rm.Refused("the lease is another epoch's")
            if isinstance(action, rm.Release):
                world.idle = action.idle
                world.give_up(RunStatus.SUSPENDED)
                return rm.Released(world.view())
            world.give_up(action.status)
            return rm.Finished(world.view())
    raise AssertionError(action)


WRITES = (rm.Claim, rm.Commit, rm.Finish, rm.Release)


def read(world: World, action: rm.Action, choose: Choose[Any]) -> rm.Event:
    match action:
        case rm.LoadHistory():
            # Rarely: none at all (a thread gone), or one short (a read behind the run).
            messages = tuple(world.history)
            match choose(("all",) * 8 + ("none", "short")):
                case "none":
                    messages = ()
                case "short" if len(messages) > 1:
                    messages = messages[:-1]
            return rm.HistoryLoaded(messages, now_for(choose), lost(world, choose))
        case rm.ReadRun():
            return rm.RunRead(world.view(), now_for(choose), lost(world, choose))
        case rm.RunTools(calls=calls):
            options = ["all", "partial", "failed"]
            if not (world.held_by_us and world.live):
                options.append("lost")
            if not world.ours_now:
                options.append("refused")
            match choose(options):
                case "all":
                    return rm.ToolsRan(tuple(RESULT for _ in calls))
                case "partial":
                    return rm.ToolsRan(tuple(None for _ in calls))
                case "lost":
                    return rm.ToolsRan(None)
                case "failed":
                    error = ClassifiedError("tool_timed_out", "ran out of time", False)
                    return rm.ToolsRan(None, failed=error)
            return rm.ToolsRan(None, refused="claimed by another epoch")
        case rm.RunTurn():
            # The lease keeper saw the cancel (a renewal, or the lease check of a writer the
            # cancel's mark refused) only when the run is cancelled; the turn may then have
            # been abandoned, fenced by the mark, or have ended on its own meanwhile.
            seen = world.status == RunStatus.CANCELLED and choose((False, True))
            if seen and choose(("abandoned", "fenced", "ended")) != "ended":
                return rm.TurnEnded(
                    choose((None, TurnFenced("the cancel's mark refused a put"))), cancelled=True
                )
            return rm.TurnEnded(turn_outcome(world, choose), cancelled=seen)
        case rm.ConfirmOwner():
            return rm.OwnerAnswered(world.held_by_us and world.live and choose((True, False)))
        case rm.ClearTurnCheckpoint():
            return rm.TurnCheckpointCleared(choose(tuple(Cleared)))
        case rm.SettleCheckpoint():
            return rm.CheckpointSettled(choose((False, True)))
        case rm.CheckFence():
            return rm.FenceChecked(choose((world.view(), world.view(), None)))
    raise AssertionError(action)


@dataclass
class Walk:
    world: World
    machine: rm.RunMachine
    #: (phase, event type) of every transition taken
    taken: list[tuple[rm.Phase, type]] = field(default_factory=list)


def walk(choose: Choose[Any]) -> tuple[Walk, rm.Action]:
    """One invocation against the model world, to its terminal action."""
    machine = rm.RunMachine(
        "r1",
        ME,
        LEASE,
        deadline=DEADLINE,
        max_idle_suspensions=3,
        turn_headroom=10.0,
    )
    world = World(status=choose((RunStatus.QUEUED, RunStatus.SUSPENDED, RunStatus.COMPLETED)))
    if choose((False, True)):  # its model asked for a tool the last invocation did not run
        world.history.append(Message(role="assistant", content=(CALL,)))
        world.turn = 1
    if choose((False, True)):  # a dead holder's lease, expired or not
        world.epoch, world.owner, world.live = 1, OTHER, choose((False, True))
        world.status = RunStatus.RUNNING if world.status.runnable else world.status
    w = Walk(world, machine)
    action = machine.start()
    for _ in range(MAX_STEPS):
        if isinstance(action, rm.TERMINAL):
            return w, action
        interfere(world, choose)
        fault = choose(("none",) * 6 + ("before", "after"))
        if fault == "before":
            event: rm.Event = rm.Faulted()
        elif isinstance(action, WRITES):
            event = write(world, action, choose)
            event = rm.Faulted() if fault == "after" else event
        else:
            event = rm.Faulted() if fault == "after" else read(world, action, choose)
        w.taken.append((machine.phase, type(event)))
        action = machine.send(event)
    raise AssertionError(f"no terminal action after {MAX_STEPS} steps: {machine.phase}")


def check_exit(w: Walk, action: rm.Action, choose: Choose[bool]) -> None:
    world = w.world
    if isinstance(action, rm.Crash):
        # The exception fails the queue record: it comes back and drives the run. A lease the
        # invocation knew it held is released first, so the next delivery need not wait.
        if world.held_by_us and w.machine.epoch == world.ours:
            assert action.release, "a crash while the lease is ours must release it"
        if action.release and world.held_by_us and choose((True, False)):
            world.give_up(RunStatus.SUSPENDED)
        return
    assert isinstance(action, rm.Exit)
    result = action.result
    record = disposition(result, now=NOW, lease_seconds=LEASE).action
    if world.status.terminal or record is Action.RETRY:
        return  # ended, or the record comes back
    if record is Action.CONTINUE:
        assert not world.held_by_us, f"a continuation for a run still held: {result}"
        assert result.run is not None and result.run.lease.owner is None
        return
    assert not world.ours_now, f"acknowledged a run its epoch still holds: {result} {world}"


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_every_way_out_leaves_the_run_ended_handed_over_or_another_epoch_s(
    data: st.DataObject,
) -> None:
    def choose(options: Sequence[Any]) -> Any:
        return data.draw(st.sampled_from(list(options)))

    w, action = walk(choose)
    check_exit(w, action, choose)


def test_the_walks_reach_every_transition_of_the_table() -> None:
    taken: set[tuple[rm.Phase, type]] = set()
    exits: set[str] = set()
    for seed in range(4000):
        choose = random.Random(seed).choice
        w, action = walk(choose)
        check_exit(w, action, choose)
        taken.update(w.taken)
        exits.add(action.result.end.value if isinstance(action, rm.Exit) else "crash")
    assert set(rm.TRANSITIONS) - taken == set()
    assert exits == {*(end.value for end in RunEnd), "crash"}
