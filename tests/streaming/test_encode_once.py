"""A checkpoint put serializes its checkpoint once: the store's body and the writer's byte
count come from one encode (a put's CPU is mostly that encode)."""

from __future__ import annotations

from typing import Any

import pytest

from awaken_s3.models import StreamCheckpoint, encode_checkpoint
from awaken_s3.streaming.outcome import TurnCompleted
from awaken_s3.streaming.scripted import ScriptedProvider, text_turn
from tests.fixtures.clock import FakeClock

from .conftest import CountingStore, RecordingSleep, make_runner, run


async def test_each_put_encodes_its_checkpoint_once(
    store: CountingStore,
    clock: FakeClock,
    sleep: RecordingSleep,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dumps = 0
    dump = StreamCheckpoint.model_dump

    def counting(self: StreamCheckpoint, **kwargs: Any) -> dict[str, Any]:
        nonlocal dumps
        dumps += 1
        return dump(self, **kwargs)

    monkeypatch.setattr(StreamCheckpoint, "model_dump", counting)
    provider = ScriptedProvider([text_turn("A turn checkpointed at every delta.", chunk=3)])
    outcome = await run(make_runner(provider, store, clock, sleep))
    assert isinstance(outcome, TurnCompleted)
    stats = outcome.checkpoint_stats
    assert stats.puts > 3
    assert dumps == stats.puts
    assert stats.bytes > 0


def test_a_changed_copy_is_encoded_anew() -> None:
    first = StreamCheckpoint(run_id="r1", thread_id="t1", model="m", turn=0, partial_text="a")
    body = encode_checkpoint(first)
    assert encode_checkpoint(first) == body
    assert b'"ab"' in encode_checkpoint(first.model_copy(update={"partial_text": "ab"}))
    assert encode_checkpoint(first) == body
