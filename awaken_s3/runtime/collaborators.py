"""What the run loop is given besides its stores: the turn runner, each agent's provider and a
listener of its commits (protocols, so a test or a caller's own parts fit)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from awaken_s3.messages import Message
from awaken_s3.streaming.outcome import TurnOutcome
from awaken_s3.streaming.provider import Provider
from awaken_s3.streaming.turn_request import TurnRequest
from awaken_s3.threads.models import RunState

if TYPE_CHECKING:
    from awaken_s3.agents import Agent


class TurnRunnerLike(Protocol):
    """What the loop needs from :class:`awaken_s3.streaming.runner.TurnRunner`."""

    async def run_turn(self, turn: TurnRequest) -> TurnOutcome: ...


#: the provider an agent's turns stream from; None: the runner's own
ProviderLookup = Callable[["Agent"], Awaitable[Provider | None]]


class RunListener(Protocol):
    """Told what the loop committed (the worker's live pushes, ``awaken_s3.service.push``)."""

    def turn_committed(self, run: RunState, message: Message) -> None:
        """``message`` is committed as the run's turn ``run.turn - 1``; must not block."""
