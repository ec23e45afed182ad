"""What a view builds from the turn's events is the committed text, wherever the cuts fall.

The same cutting model as the seam properties (drops retried in process, kills resumed by a
new runner from the checkpoint, both continuation forms, echoes): a view that follows only the
documented rule (show ``TurnResumed.text``, extend it with each ``TextChunk`` whose offset is
the length shown) ends with the whole committed text, and never had to take text back within
one process.
"""

from __future__ import annotations

import asyncio
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken_s3.streaming.outcome import TurnCompleted
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.turn_events import TextChunk, TurnEvent, TurnResumed
from awaken_s3.streaming.turn_request import TurnRequest

from .conftest import HISTORY, RUN_ID, THREAD_ID, CountingStore
from .test_seam_properties import CuttingModel, Killed, runner_for, whole_text


class View:
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


async def drive(model: CuttingModel) -> tuple[TurnCompleted, View]:
    store = CountingStore()
    request = ModelRequest(model="m", messages=HISTORY)
    for epoch in range(1, 40):
        view = View()  # a new process: its view starts empty
        try:
            outcome = await runner_for(model, store).run_turn(
                TurnRequest(RUN_ID, THREAD_ID, turn=0, epoch=epoch, request=request),
                observer=view,
            )
        except Killed:
            continue
        assert isinstance(outcome, TurnCompleted), outcome
        return outcome, view
    raise AssertionError("the turn never completed")


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32 - 1),
    prefill=st.booleans(),
    words=st.integers(3, 30),
    cuts=st.lists(
        st.none() | st.tuples(st.integers(0, 60), st.sampled_from(["drop", "kill"])),
        max_size=5,
    ),
)
def test_a_view_built_from_the_events_is_the_committed_text(
    seed: int, prefill: bool, words: int, cuts: list[tuple[int, str] | None]
) -> None:
    rng = random.Random(seed)
    model = CuttingModel(whole_text(rng, words), prefill, rng, list(cuts))
    outcome, view = asyncio.run(drive(model))
    assert view.shown == outcome.message.text == model.whole
