"""The run loop: drive one run from its committed state until it ends or must pause.

One :meth:`RunLoop.run` call is one worker invocation. Every decision is
:class:`~awaken_s3.runtime.run_machine.RunMachine`'s (pure, its transitions in one table);
this is the thin async driver that performs what it asks for: the lease
(:class:`~awaken_s3.runtime.lease.RunLease`), reads of the run and its thread, tool calls,
model turns (:class:`~awaken_s3.streaming.runner.TurnRunner`), commits and checkpoints.

Liveness: the run record is the only authority on who drives a run. Every way out of
:meth:`RunLoop.run` leaves the run ended, or with its lease released (the caller sends the
message that drives it next, or keeps the record a crash fails), or owned by another epoch
that the returned run state shows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from awaken_s3.runtime import run_machine as rm
from awaken_s3.runtime.collaborators import ProviderLookup, RunListener, TurnRunnerLike
from awaken_s3.runtime.lease import Heartbeat, RunLease
from awaken_s3.runtime.run_machine import (
    DEFAULT_MAX_IDLE_SUSPENSIONS,
    NO_PROGRESS,
    STEP_LIMIT,
    THREAD_MOVED_ON,
    UNKNOWN_AGENT,
    UNKNOWN_TOOL,
    RunMachine,
    pending_tool_calls,
)
from awaken_s3.runtime.run_result import RunEnd, RunResult
from awaken_s3.runtime.tool_batch import run_tool_calls
from awaken_s3.runtime.tools import Sleep, ToolRegistry, ToolRunFailed
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.cleanup import Cleared, delete_turn_checkpoint, settle_checkpoint
from awaken_s3.streaming.outcome import TurnOutcome
from awaken_s3.streaming.turn_request import NOT_LOADED, TurnRequest
from awaken_s3.threads.base import ThreadStore
from awaken_s3.threads.errors import (
    CommitFenced,
    LeaseLost,
    LeaseUnavailable,
    ThreadMovedOn,
    ThreadStoreError,
    ToolCallConflict,
)
from awaken_s3.threads.models import RunState, TurnCommit

if TYPE_CHECKING:
    from awaken_s3.agents import Agent, App

log = logging.getLogger("awaken_s3.runtime")

__all__ = [
    "NO_PROGRESS",
    "STEP_LIMIT",
    "THREAD_MOVED_ON",
    "UNKNOWN_AGENT",
    "UNKNOWN_TOOL",
    "RunEnd",
    "RunListener",
    "RunLoop",
    "RunResult",
    "TurnRunnerLike",
    "pending_tool_calls",
]


class RunLoop:
    def __init__(
        self,
        store: ThreadStore,
        runner: TurnRunnerLike,
        checkpoints: StreamCheckpointStore,
        tools: ToolRegistry | None = None,
        *,
        worker_id: str,
        lease_seconds: float = 60.0,
        renew_every: float | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        max_idle_suspensions: int = DEFAULT_MAX_IDLE_SUSPENSIONS,
        app: App | None = None,
        provider_for: ProviderLookup | None = None,
        turn_headroom: float = 0.0,
        listener: RunListener | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        """``app``: the agents whose runs it drives (without one, every run is the default
        agent's, with ``tools``); ``provider_for``: an agent's provider (None: the runner's);
        ``renew_every`` 0 disables renewal; ``max_idle_suspensions`` and ``turn_headroom``:
        see :class:`~awaken_s3.runtime.run_machine.RunMachine`; ``listener``: told of each
        committed model turn; ``sleep``: the timer that cuts a tool call at the deadline."""
        if max_idle_suspensions < 1:
            raise ValueError("max_idle_suspensions must be >= 1")
        if app is not None and tools is not None:
            raise ValueError("give the tools to the app's agents, not to the loop")
        if app is None:
            from awaken_s3.agents import App, default_agent

            app = App([default_agent(tools or ToolRegistry())])
        self.app, self.provider_for = app, provider_for
        self.store, self.runner, self.checkpoints = store, runner, checkpoints
        self.worker_id, self.lease_seconds, self.renew_every = worker_id, lease_seconds, renew_every
        self._clock, self._monotonic = clock, monotonic
        self.max_idle_suspensions, self.turn_headroom = max_idle_suspensions, turn_headroom
        self.listener = listener
        self._sleep = sleep

    async def run(
        self, run_id: str, *, deadline: float | None = None, heartbeat: Heartbeat | None = None
    ) -> RunResult:
        """Drive ``run_id`` until it ends, pauses at ``deadline`` (a ``time.monotonic()``
        instant) or turns out to be someone else's."""
        machine = RunMachine(
            run_id,
            self.worker_id,
            self.lease_seconds,
            deadline=deadline,
            max_idle_suspensions=self.max_idle_suspensions,
            turn_headroom=self.turn_headroom,
        )
        return await _Driver(self, machine, heartbeat).drive()


class _Driver:
    """Performs one invocation's actions and feeds their results back to its machine."""

    def __init__(self, loop: RunLoop, machine: RunMachine, heartbeat: Heartbeat | None) -> None:
        self.loop, self.machine = loop, machine
        self.store, self.run_id = loop.store, machine.run_id
        self.lease = RunLease(
            loop.store,
            machine.run_id,
            worker=loop.worker_id,
            lease_seconds=loop.lease_seconds,
            renew_every=loop.renew_every,
            clock=loop._clock,
            heartbeat=heartbeat,
        )
        self.agent: Agent | None = None
        #: what the last action raised (re-raised when the machine crashes)
        self.error: BaseException | None = None

    async def drive(self) -> RunResult:
        action: rm.Action = self.machine.start()
        try:
            while not isinstance(action, rm.Exit):
                if isinstance(action, rm.Crash):
                    await self.lease.stop_renewing()
                    if action.release:
                        await self.lease.release_after_crash()
                    raise action.error or self.error or RuntimeError("the run machine crashed")
                action = self.machine.send(await self.outcome_of(action))
            return action.result
        finally:
            await self.lease.stop_renewing()

    async def outcome_of(self, action: rm.Action) -> rm.Event:
        try:
            return await self.perform(action)
        except BaseException as exc:  # the machine decides; the driver re-raises it
            self.error = exc
            return rm.Faulted()

    async def perform(self, action: rm.Action) -> rm.Event:
        store, run_id, now, lease = self.store, self.run_id, self.loop._monotonic, self.lease
        match action:
            case rm.Claim():
                try:
                    run = await lease.claim()
                except LeaseUnavailable as exc:
                    return rm.ClaimRefused(
                        await store.get_run(run_id), self.loop._clock(), str(exc)
                    )
                return await self.resolve(run)
            case rm.SettleCheckpoint(judge=judge):
                cleared = await settle_checkpoint(self.loop.checkpoints, run_id, judge)
                return rm.CheckpointSettled(left=cleared is Cleared.LEFT)
            case rm.LoadHistory():
                messages = await store.load_messages(self.machine.run.thread_id)
                return rm.HistoryLoaded(tuple(messages), now(), lease.lost)
            case rm.ReadRun():
                return rm.RunRead(await store.get_run(run_id), now(), lease.lost)
            case rm.RunTools():
                return await self.run_tools(action)
            case rm.RunTurn():
                outcome = await self.run_turn(action)
                return rm.TurnEnded(outcome, cancelled=lease.cancelled)
            case rm.ConfirmOwner():
                return rm.OwnerAnswered(await self.still_ours())
            case rm.Commit():
                return await self.commit(action.commit)
            case rm.ClearTurnCheckpoint(turn=turn, thread_id=thread, outcome=outcome):
                wait = self.machine.late_put_wait(now())
                cleared = await delete_turn_checkpoint(
                    self.loop.checkpoints,
                    run_id,
                    turn,
                    outcome,
                    thread_id=thread,
                    late_put_wait=wait,
                )
                return rm.TurnCheckpointCleared(cleared)
            case rm.Finish() | rm.Release():
                try:
                    if isinstance(action, rm.Release):
                        return rm.Released(await lease.release(idle_suspensions=action.idle))
                    return rm.Finished(await lease.finish(action.status, action.error))
                except LeaseLost as exc:
                    return rm.Refused(str(exc))
            case rm.CheckFence():
                await lease.stop_renewing()
                try:
                    return rm.FenceChecked(await store.get_run(run_id))
                except ThreadStoreError as exc:
                    log.warning("run %s: could not re-read the run after a fence: %s", run_id, exc)
                    return rm.FenceChecked(None)
        raise AssertionError(f"not an action to perform: {action!r}")

    async def resolve(self, run: RunState) -> rm.Claimed:
        """The claimed run's agent and the tools its requests send, or why there are none."""
        from awaken_s3.agents import UnknownAgent

        now, names = self.lease.claimed_at, run.settings.tools
        try:
            self.agent = agent = self.loop.app.agent_of(run.settings)
        except UnknownAgent as exc:
            return rm.Claimed(run, now, agent_problem=str(exc))
        try:
            # The agent's MCP servers are listed here, once per process (Agent.tool_specs).
            tools = await agent.tool_specs(names) if names else ()
        except KeyError as exc:
            return rm.Claimed(run, now, tools_problem=str(exc.args[0]))
        return rm.Claimed(run, now, tools=tools)

    async def commit(self, commit: TurnCommit) -> rm.Event:
        if commit.final_status is not None:
            await self.lease.stop_renewing()  # the commit releases the lease itself
        try:
            result = await self.store.commit_turn(commit)
        except CommitFenced as exc:
            return rm.Refused(str(exc))
        except ThreadMovedOn as exc:
            return rm.MovedOn(str(exc))
        if result.duplicate:
            log.info("run %s: commit %s had already landed", self.run_id, commit.commit_id)
        if commit.advance_turn and self.loop.listener is not None:
            self.loop.listener.turn_committed(result.run, commit.messages[0])
        return rm.Committed(result.run)

    async def still_ours(self) -> bool:
        try:
            return await self.lease.confirm()
        except ThreadStoreError:
            return False

    def require_agent(self) -> Agent:
        assert self.agent is not None, "resolved at the claim"
        return self.agent

    async def run_turn(self, action: rm.RunTurn) -> TurnOutcome | None:
        provider = None
        if self.loop.provider_for is not None:
            provider = await self.loop.provider_for(self.require_agent())
        job = TurnRequest(
            run_id=self.run_id,
            thread_id=action.thread_id,
            turn=action.turn,
            epoch=self.machine.epoch,
            request=action.request,
            deadline=self.machine.deadline,
            existing=NOT_LOADED if action.read_checkpoint else None,
            confirm_owner=self.lease.confirm,
            provider=provider,
        )
        return await self.lease.while_held(self.loop.runner.run_turn(job))

    async def run_tools(self, action: rm.RunTools) -> rm.ToolsRan:
        machine, monotonic = self.machine, self.loop._monotonic
        batch = run_tool_calls(
            self.store,
            self.require_agent(),
            action.run,
            action.calls,
            epoch=machine.epoch,
            may_start=lambda: not machine.too_late_to_start(monotonic()),
            deadline=machine.deadline,
            monotonic=monotonic,
            sleep=self.loop._sleep,
        )
        try:
            results = await self.lease.while_held(batch)
        except (LeaseLost, ToolCallConflict) as exc:
            return rm.ToolsRan(None, refused=str(exc))
        except ToolRunFailed as exc:
            return rm.ToolsRan(None, failed=exc.error)
        if results is None:
            return rm.ToolsRan(None, cancelled=self.lease.cancelled)
        return rm.ToolsRan(tuple(results))
