"""The seam between a saved prefix and its continuation is decided before it is kept.

A model asked to continue a cut-off reply either continues its own message (prefill) or,
told in a user message to continue, often repeats the last words first. Either way, and
wherever the stream is cut (by a dropped connection retried in process, or by the death of
the process with a later resume from the checkpoint), the committed text must be the model's
whole text: a continuation cut while it may still be an echo of the prefix, or while its
leading whitespace may still merge with the prefix's, is dropped, never appended.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken_s3.messages import Message
from awaken_s3.streaming.accumulator import StreamAccumulator
from awaken_s3.streaming.coalescer import CheckpointPolicy
from awaken_s3.streaming.continuation import (
    CONTINUE_INSTRUCTION,
)
from awaken_s3.streaming.errors import ConnectionDropped
from awaken_s3.streaming.events import StopEvent, StreamEvent, TextDelta, UsageEvent
from awaken_s3.streaming.outcome import TurnCompleted
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities
from awaken_s3.streaming.retry import RetryPolicy
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.streaming.turn_events import TextChunk, TurnEvent, TurnResumed
from awaken_s3.streaming.turn_request import TurnRequest
from tests.fixtures.clock import FakeClock

from .conftest import HISTORY, RUN_ID, THREAD_ID, CountingStore, RecordingSleep
from .echoes import echo_of

SEPARATORS = [" ", " ", " ", ", ", ".\n\n", "\n", " - ", "  "]


class Killed(BaseException):
    """The process running the turn died: nothing after this point runs."""


def whole_text(rng: random.Random, words: int) -> str:
    # Distinct words: a repeated ending would make the echo check trim a legitimate repeat,
    # which the seam policy documents as not byte-for-byte (strictly periodic text).
    parts = []
    for i in range(words):
        parts.append(f"w{i}{rng.choice('abcdefgh')}{rng.choice('xyz') * rng.randint(0, 6)}")
        parts.append(rng.choice(SEPARATORS))
    return "".join(parts).rstrip() + "."


@dataclass
class CuttingModel:
    """Knows its whole text; continues any prefix of it in either form; cuts where told."""

    whole: str
    prefill: bool
    rng: random.Random
    #: per call: None (no cut), or (delta index, "drop" | "kill")
    cuts: list[tuple[int, str] | None]
    name: str = "cutting"
    prefixes: list[str] = field(default_factory=list)

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=self.prefill)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self._events(request)

    def _prefix(self, request: ModelRequest) -> str:
        messages = list(request.messages)
        if messages[-1].role == "assistant":
            return messages[-1].text
        if messages[-1].text == CONTINUE_INSTRUCTION:
            return messages[-2].text
        return ""

    async def _events(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        prefix = self._prefix(request)
        self.prefixes.append(prefix)
        # The invariant under test: whatever was kept is the beginning of the whole text.
        assert self.whole.startswith(prefix), f"a kept prefix left the text: {prefix!r}"
        rest = self.whole[len(prefix) :]
        text = rest if self.prefill or not prefix else echo_of(prefix, self.rng) + rest
        chunks = []
        i = 0
        while i < len(text):
            step = self.rng.randint(1, 6)
            chunks.append(text[i : i + step])
            i += step
        cut = self.cuts.pop(0) if self.cuts else None
        for index, chunk in enumerate(chunks):
            if cut is not None and index == cut[0]:
                if cut[1] == "kill":
                    raise Killed()
                raise ConnectionDropped("cut by the test")
            await asyncio.sleep(0)
            yield TextDelta(chunk)
        yield UsageEvent(10, len(text))
        yield StopEvent("end_turn")


def runner_for(model: CuttingModel, store: CountingStore) -> TurnRunner:
    clock = FakeClock()
    return TurnRunner(
        model,
        store,
        writer_id="w",
        retry_policy=RetryPolicy(max_interruptions=50, idle_timeout=30.0),
        # A put at every delta, so a kill can land right after any snapshot.
        checkpoint_policy=CheckpointPolicy(min_interval=0.0, min_bytes=0),
        clock=clock,
        sleep=RecordingSleep(clock),
        rng=random.Random(3),
    )


class View:
    """A user interface fed the turn's events, following only the documented rule: show
    ``TurnResumed.text``, extend it with each ``TextChunk`` whose offset is the length shown."""

    def __init__(self) -> None:
        self.shown = ""

    def __call__(self, event: TurnEvent) -> None:
        if isinstance(event, TurnResumed):
            if not event.from_checkpoint:
                # Within one process a resume never takes shown text back.
                assert event.text.startswith(self.shown), (event.text, self.shown)
            self.shown = event.text
        elif isinstance(event, TextChunk):
            assert event.offset == len(self.shown), (event, self.shown)
            self.shown += event.text


async def drive(model: CuttingModel) -> TurnCompleted:
    store = CountingStore()
    request = ModelRequest(model="m", messages=HISTORY)
    for epoch in range(1, 40):
        runner = runner_for(model, store)
        view = View()  # a new process: its view starts empty
        try:
            outcome = await runner.run_turn(
                TurnRequest(RUN_ID, THREAD_ID, turn=0, epoch=epoch, request=request),
                observer=view,
            )
        except Killed:
            continue  # the process died; a new one resumes from the checkpoint
        assert isinstance(outcome, TurnCompleted), outcome
        # Every checkpoint ever written held a beginning of the whole text.
        for checkpoint in store.history:
            assert model.whole.startswith(checkpoint.partial_text), checkpoint.partial_text
        # What the last process's view showed is the committed text.
        assert view.shown == outcome.message.text
        return outcome
    raise AssertionError("the turn never completed")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32 - 1),
    prefill=st.booleans(),
    words=st.integers(3, 40),
    cuts=st.lists(
        st.none() | st.tuples(st.integers(0, 60), st.sampled_from(["drop", "kill"])),
        max_size=6,
    ),
)
def test_the_committed_text_is_the_whole_text_wherever_the_cuts_fall(
    seed: int, prefill: bool, words: int, cuts: list[tuple[int, str] | None]
) -> None:
    rng = random.Random(seed)
    model = CuttingModel(whole_text(rng, words), prefill, rng, list(cuts))
    outcome = asyncio.run(drive(model))
    assert outcome.message.text == model.whole


def test_an_interrupted_echo_is_dropped_not_appended() -> None:
    # Without prefill the model repeats "fox jumps" first; cut after "fox ju".
    acc = StreamAccumulator("The quick brown fox jumps", trim_echo=True)
    acc.apply(TextDelta("fox "))
    acc.apply(TextDelta("ju"))
    assert acc.text == "The quick brown fox jumps"  # held back: still possibly an echo
    acc.restart(acc.text, trim_echo=True)  # the cut: plan from the decided text
    for chunk in ("fox jumps", " over the", " lazy dog."):
        acc.apply(TextDelta(chunk))
    assert acc.text == "The quick brown fox jumps over the lazy dog."


def test_whitespace_split_across_chunks_is_not_doubled_by_a_cut() -> None:
    # With prefill the prefix went out as "Done." and the model re-emits the blank line.
    acc = StreamAccumulator("Done.\n\n", trim_echo=False)
    acc.apply(TextDelta("\n"))
    assert acc.text == "Done.\n\n"  # "\n" may still become the prefix's "\n\n"
    acc.restart(acc.text, trim_echo=False)
    acc.apply(TextDelta("\n"))
    acc.apply(TextDelta("\nNext part."))
    assert acc.text == "Done.\n\nNext part."


def test_a_completed_turn_keeps_an_undecided_tail_as_it_stands() -> None:
    acc = StreamAccumulator("It was the best of times", trim_echo=True)
    acc.apply(TextDelta("best of"))  # could still be an echo of "best of times"...
    acc.apply(StopEvent("end_turn"))  # ... but the model is done: nothing else will come
    message, _ = acc.message()
    assert message.text == "It was the best of timesbest of"
    assert acc.snapshot(
        run_id=RUN_ID,
        thread_id=THREAD_ID,
        model="m",
        turn=0,
        retry_count=0,
        epoch=1,
        writer="w",
    ).partial_text == ("It was the best of times")


def test_history_is_untouched_by_the_continuation_messages() -> None:
    assert list(HISTORY) == [Message.user("What is the answer?")]
