"""No fault leaves a run that nobody drives, and none leaves a checkpoint behind.

Each test is one way a run used to be stranded (running, lease held, no message) or a
checkpoint used to be left for good. The run record is the authority: a fence seen in the
checkpoint layer is checked against it, and every way out of an invocation leaves the run
ended, handed over, or held by another live epoch. Memory and DynamoDB + S3 on moto.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.runtime.loop import NO_PROGRESS, RunEnd
from awaken_s3.runtime.tools import ToolRegistry
from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.streaming.events import StreamEvent
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities
from awaken_s3.streaming.scripted import Hook, ScriptedProvider, finish, text_deltas
from awaken_s3.threads import RunStatus, ThreadStore
from tests.fixtures.clock import FakeClock
from tests.fixtures.runs import SETTINGS, seed_run
from tests.runtime.conftest import LEASE, Backend, LoopFactory
from tests.runtime.scripts import (
    Effects,
    TurnAwareProvider,
    adding_registry,
    expected_thread,
    tool_turns,
)

PROMPT = "add things up"
ANSWER = "The quick brown fox jumps over the lazy dog, twice over."


def answer_model(text: str = ANSWER) -> TurnAwareProvider:
    from tests.runtime.scripts import TurnSpec

    return TurnAwareProvider([TurnSpec(text)])


def no_tools() -> ToolRegistry:
    return adding_registry(Effects())


async def committed_texts(threads: ThreadStore) -> list[str]:
    return [m.text for m in await threads.load_messages("t1") if m.role == "assistant"]


def saved(**fields: Any) -> StreamCheckpoint:
    base: dict[str, Any] = {
        "run_id": "r1",
        "thread_id": "t1",
        "model": SETTINGS.model,
        "turn": 0,
        "partial_text": "",
        "epoch": 1,
        "writer": "someone",
    }
    base.update(fields)
    return StreamCheckpoint(**base)


async def test_a_checkpoint_from_an_epoch_the_run_never_had_does_not_strand_the_run(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, make_loop: LoopFactory
) -> None:
    # What a point-in-time restore of the table leaves: the run record is back at an earlier
    # epoch while S3 still holds a checkpoint written under a later one.
    await seed_run(threads, prompt=PROMPT)
    await checkpoints.put(
        saved(partial_text="The quick brown fox ", epoch=42), expected_version=None
    )
    result = await make_loop(answer_model(), no_tools()).run("r1")
    assert result.end == RunEnd.COMPLETED
    assert await committed_texts(threads) == [ANSWER]
    assert (await threads.get_run("r1")).status == RunStatus.COMPLETED
    assert await checkpoints.get("r1") is None


async def test_a_live_checkpoint_deleted_under_its_writer_does_not_strand_the_run(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, make_loop: LoopFactory
) -> None:
    # What `checkpoints clean --older-than` can do to a slow but live turn.
    await seed_run(threads, prompt=PROMPT)
    removed: list[asyncio.Future[None]] = []

    def delete_it() -> None:
        removed.append(asyncio.ensure_future(checkpoints.delete("r1")))

    provider = ScriptedProvider(
        [
            [
                *text_deltas(ANSWER[:20], chunk=4),
                Hook(delete_it),
                *text_deltas(ANSWER[20:], chunk=4),
                *finish(),
            ]
        ]
    )
    result = await make_loop(provider, no_tools()).run("r1")
    assert removed and removed[0].done()
    assert result.end == RunEnd.COMPLETED
    assert await committed_texts(threads) == [ANSWER]
    assert await checkpoints.get("r1") is None


class FailingDeletes:
    """A checkpoint store whose first ``failures`` deletes fail (an S3 blip)."""

    def __init__(self, inner: StreamCheckpointStore, failures: int) -> None:
        self.inner = inner
        self.failures = failures

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        return await self.inner.get(run_id)

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        return await self.inner.put(checkpoint, expected_version=expected_version)

    async def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise StreamCheckpointError("injected: S3 answered 500 to the delete")
        await self.inner.delete(run_id, expected_version=expected_version)


async def test_two_failed_deletes_in_a_row_do_not_fence_the_next_turn(
    backend: Backend, clock: FakeClock, make_loop: LoopFactory
) -> None:
    # The tool turn's delete fails after its commit, and again when the next turn finds the
    # stale object: the worker's own leftover must not block the next turn's first write.
    from tests.runtime.conftest import build_loop

    threads = backend.threads
    await seed_run(threads, prompt=PROMPT)
    flaky = FailingDeletes(backend.checkpoints, failures=2)
    effects = Effects()
    turns = tool_turns(1)
    loop = build_loop(
        threads, flaky, TurnAwareProvider(turns), adding_registry(effects), worker="w1", clock=clock
    )
    result = await loop.run("r1")
    assert result.end == RunEnd.COMPLETED
    assert await threads.load_messages("t1") == expected_thread(PROMPT, turns, ["1"])
    assert effects.all() == ["add:0"]
    assert await backend.checkpoints.get("r1") is None


async def test_the_redelivery_of_an_ended_run_deletes_its_leftover_checkpoint(
    backend: Backend, clock: FakeClock
) -> None:
    # The last turn committed and its delete failed (or the worker died right after the
    # commit): the record is kept, and its next delivery finds the run ended and cleans up.
    from tests.runtime.conftest import build_loop

    threads = backend.threads
    await seed_run(threads, prompt=PROMPT)
    flaky = FailingDeletes(backend.checkpoints, failures=1)
    first = build_loop(threads, flaky, answer_model(), no_tools(), worker="w1", clock=clock)
    result = await first.run("r1")
    assert (result.end, result.checkpoint_left) == (RunEnd.COMPLETED, True)
    left = await backend.checkpoints.get("r1")
    assert left is not None and left.checkpoint.turn == 0

    again = build_loop(threads, flaky, answer_model(), no_tools(), worker="w2", clock=clock)
    redelivered = await again.run("r1")
    assert (redelivered.end, redelivered.checkpoint_left) == (RunEnd.NOT_RUNNABLE, False)
    assert await backend.checkpoints.get("r1") is None
    assert await committed_texts(threads) == [ANSWER]  # never replayed


class GatedModel:
    """Streams ``text`` once ``gate`` opens; ``started`` is set when the stream begins."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.started = asyncio.Event()
        self.gate = asyncio.Event()
        self.name = "gated"

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=True)

    def stream(self, request: ModelRequest) -> Any:
        return self._events()

    async def _events(self) -> Any:
        self.started.set()
        await self.gate.wait()
        events: list[StreamEvent] = [*text_deltas(self.text), *finish()]
        for event in events:
            await asyncio.sleep(0)
            yield event


async def test_a_fenced_zombie_deletes_the_checkpoint_it_created_after_the_run_ended(
    backend: Backend, clock: FakeClock
) -> None:
    from tests.runtime.conftest import build_loop

    threads, checkpoints = backend.threads, backend.checkpoints
    await seed_run(threads, prompt=PROMPT)
    zombie_model = GatedModel("a zombie's answer that must never stay anywhere")
    # The zombie never renews: its lease runs out while it waits on the gate.
    zombie = build_loop(
        threads, checkpoints, zombie_model, no_tools(), worker="zombie", clock=clock, renew_every=0
    )
    zombie_run = asyncio.create_task(zombie.run("r1"))
    await zombie_model.started.wait()

    clock.advance(LEASE + 1)
    owner = build_loop(threads, checkpoints, answer_model(), no_tools(), worker="w2", clock=clock)
    assert (await owner.run("r1")).end == RunEnd.COMPLETED
    assert await checkpoints.get("r1") is None

    # The zombie wakes up and starts writing: its first put is a create, which succeeds now
    # that the owner deleted the object. Its commit is fenced; it must not leave the object.
    zombie_model.gate.set()
    result = await zombie_run
    assert result.end == RunEnd.FENCED
    assert result.run is not None and result.run.status == RunStatus.COMPLETED
    assert await checkpoints.get("r1") is None
    assert await committed_texts(threads) == [ANSWER]


async def test_a_run_that_keeps_handing_over_without_progress_fails_instead_of_looping(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    attempts = []
    for attempt in range(10):
        loop = make_loop(answer_model(), no_tools(), worker=f"w{attempt}")
        # No time left at all: every invocation hands the run over without streaming.
        result = await loop.run("r1", deadline=time.monotonic() - 1)
        attempts.append(result.end)
        if result.end != RunEnd.SUSPENDED:
            break
    budget = loop.max_idle_suspensions
    assert attempts == [RunEnd.SUSPENDED] * (budget - 1) + [RunEnd.FAILED]
    run = await threads.get_run("r1")
    assert run.status == RunStatus.FAILED and run.error is not None
    assert (run.error.code, run.error.retryable) == (NO_PROGRESS, False)


async def test_progress_resets_the_hand_over_count(
    threads: ThreadStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    for attempt in range(3):
        await make_loop(answer_model(), no_tools(), worker=f"idle{attempt}").run(
            "r1", deadline=time.monotonic() - 1
        )
    assert (await threads.get_run("r1")).idle_suspensions == 3
    done = await make_loop(answer_model(), no_tools(), worker="busy").run("r1")
    assert done.end == RunEnd.COMPLETED


async def test_a_claim_after_a_dead_holder_reports_how_long_the_run_waited(
    threads: ThreadStore, clock: FakeClock, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)
    await threads.claim_run("r1", worker="died", lease_seconds=LEASE)
    clock.advance(LEASE + 7)  # the holder's last renewal was at the claim
    result = await make_loop(answer_model(), no_tools()).run("r1")
    assert result.end == RunEnd.COMPLETED
    assert result.resume_delay == pytest.approx(LEASE + 7)

    # A second run, on a thread of its own (the scripted model counts turns per thread).
    await seed_run(threads, "r2", thread_id="t2", prompt="again")
    fresh = await make_loop(answer_model(), no_tools(), worker="w3").run("r2")
    assert fresh.end == RunEnd.COMPLETED
    assert fresh.resume_delay is None  # nobody held it before


class RecordingDeletes(FailingDeletes):
    def __init__(self, inner: StreamCheckpointStore) -> None:
        super().__init__(inner, failures=0)
        self.versions: list[str | None] = []

    async def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        self.versions.append(expected_version)
        await super().delete(run_id, expected_version=expected_version)


async def test_no_delete_is_ever_unconditional(backend: Backend, clock: FakeClock) -> None:
    # The bucket policy refuses a DeleteObject without If-Match on the checkpoint prefix: a
    # turn that never wrote a checkpoint deletes nothing, every other delete names a version.
    from awaken_s3.streaming.coalescer import CheckpointPolicy
    from tests.runtime.conftest import build_loop

    threads = backend.threads
    await seed_run(threads, prompt=PROMPT)
    recording = RecordingDeletes(backend.checkpoints)
    lazy = CheckpointPolicy(min_interval=3600.0, min_bytes=10**9)
    loop = build_loop(
        threads, recording, answer_model(), no_tools(), worker="w1", clock=clock, policy=lazy
    )
    assert (await loop.run("r1")).end == RunEnd.COMPLETED
    assert recording.versions == []

    await seed_run(threads, "r2", thread_id="t2", prompt=PROMPT)
    eager = build_loop(threads, recording, answer_model(), no_tools(), worker="w2", clock=clock)
    assert (await eager.run("r2")).end == RunEnd.COMPLETED
    assert recording.versions and None not in recording.versions


async def test_a_newer_build_s_checkpoint_is_deleted_once_the_run_has_ended(
    backend: Backend, clock: FakeClock
) -> None:
    import json

    from awaken_s3.models import encode_checkpoint
    from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
    from tests.runtime.conftest import build_loop

    threads, checkpoints = backend.threads, backend.checkpoints
    await seed_run(threads, prompt=PROMPT)
    payload = json.loads(encode_checkpoint(saved(partial_text="written by v2", epoch=1)))
    payload["schema_version"] = 99
    body = json.dumps(payload).encode()
    if isinstance(checkpoints, InMemoryStreamCheckpointStore):
        checkpoints.put_raw("r1", body)
    else:
        s3 = checkpoints._client  # type: ignore[attr-defined]
        await s3.put_object(Bucket=checkpoints.bucket, Key=checkpoints.key_for("r1"), Body=body)  # type: ignore[attr-defined]
    loop = build_loop(threads, checkpoints, answer_model(), no_tools(), worker="w1", clock=clock)
    result = await loop.run("r1")
    # Left alone while the run went on; flagged so the record comes back once it ended...
    assert (result.end, result.checkpoint_left) == (RunEnd.COMPLETED, True)
    assert await committed_texts(threads) == [ANSWER]
    again = build_loop(threads, checkpoints, answer_model(), no_tools(), worker="w2", clock=clock)
    redelivered = await again.run("r1")
    # ... and then, the run being over, it is stale whatever wrote it: deleted at its version.
    assert (redelivered.end, redelivered.checkpoint_left) == (RunEnd.NOT_RUNNABLE, False)
    assert await checkpoints.get("r1") is None


class FencedThenUnreadable:
    """A run store whose commit is fenced and which then cannot be read (an outage)."""

    def __init__(self, inner: ThreadStore) -> None:
        self.inner = inner
        self.down = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit_turn(self, commit: Any) -> Any:
        from awaken_s3.threads import CommitFenced

        self.down = True
        raise CommitFenced("injected: a newer epoch owns the run")

    async def get_run(self, run_id: str) -> Any:
        from awaken_s3.threads import ThreadStoreError

        if self.down:
            raise ThreadStoreError("injected: DynamoDB unreachable")
        return await self.inner.get_run(run_id)


async def test_a_fence_nobody_can_confirm_leaves_no_run_state_to_trust(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, clock: FakeClock
) -> None:
    # The caller decides from the run state the loop returns; after a fence whose run record
    # cannot be read, it must not get the state this invocation last saw (its own live lease,
    # which would read as "held by a live worker" and let the record go).
    from awaken_s3.service.dispositions import RETRY_SOON, Action, disposition
    from tests.runtime.conftest import build_loop

    await seed_run(threads, prompt=PROMPT)
    flaky = FencedThenUnreadable(threads)
    loop = build_loop(flaky, checkpoints, answer_model(), no_tools(), worker="w1", clock=clock)
    result = await loop.run("r1")
    assert (result.end, result.run) == (RunEnd.FENCED, None)
    kept = disposition(result, now=clock(), lease_seconds=LEASE)
    assert (kept.action, kept.delay) == (Action.RETRY, RETRY_SOON)


async def test_a_run_that_fails_mid_turn_leaves_no_partial_behind(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, make_loop: LoopFactory
) -> None:
    # The saved partial is of no use once the run has failed: nobody will resume it.
    from awaken_s3.streaming.errors import ContextOverflow
    from awaken_s3.streaming.scripted import Fail

    await seed_run(threads, prompt=PROMPT)
    model = ScriptedProvider(
        [[*text_deltas(ANSWER[:30]), Fail(ContextOverflow("prompt is too long", status=400))]]
    )
    result = await make_loop(model, no_tools()).run("r1")
    assert result.end == RunEnd.FAILED and not result.checkpoint_left
    assert (await threads.get_run("r1")).status == RunStatus.FAILED
    assert await checkpoints.get("r1") is None


async def test_a_run_cancelled_mid_turn_leaves_no_partial_behind(
    threads: ThreadStore, checkpoints: StreamCheckpointStore, make_loop: LoopFactory
) -> None:
    await seed_run(threads, prompt=PROMPT)

    async def cancel() -> None:
        await threads.cancel_run("r1")

    model = ScriptedProvider(
        [[*text_deltas(ANSWER[:30]), Hook(cancel), *text_deltas(ANSWER[30:]), *finish()]]
    )
    result = await make_loop(model, no_tools()).run("r1")
    assert result.end == RunEnd.CANCELLED and not result.checkpoint_left
    assert await checkpoints.get("r1") is None


class HalfThenStall:
    """Streams the first half of ``text``, then hangs (a stall: the process stops making
    progress while its lease runs out); a request carrying a prefix streams the rest."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.stalled = asyncio.Event()
        self.prefixes: list[str] = []
        self.name = "stalling"

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=True)

    def stream(self, request: ModelRequest) -> Any:
        last = request.messages[-1]
        prefix = last.text if last.role == "assistant" else ""
        self.prefixes.append(prefix)
        return self._events(prefix)

    async def _events(self, prefix: str) -> Any:
        half = len(self.text) // 2
        if not prefix:
            for event in text_deltas(self.text[:half]):
                await asyncio.sleep(0)
                yield event
            self.stalled.set()
            await asyncio.Event().wait()
        for event in [*text_deltas(self.text[len(prefix) :]), *finish()]:
            await asyncio.sleep(0)
            yield event


async def test_a_holder_that_stalled_past_its_lease_stops_and_the_run_is_claimed_afresh(
    backend: Backend, clock: FakeClock
) -> None:
    # The holder renews often (real time) but its lease is on the fake wall clock: the clock
    # jumping past the lease is a stall of the whole process (a GC pause, a frozen container)
    # as the lease sees it. Its next renewal is refused although nobody claimed the run yet:
    # it stops, hands the run over, and the next worker claims it at a new epoch.
    from tests.runtime.conftest import build_loop

    threads, checkpoints = backend.threads, backend.checkpoints
    await seed_run(threads, prompt=PROMPT)
    model = HalfThenStall(ANSWER)
    holder = build_loop(
        threads, checkpoints, model, no_tools(), worker="stalled", clock=clock, renew_every=0.01
    )
    holding = asyncio.create_task(holder.run("r1"))
    await model.stalled.wait()
    claimed = await threads.get_run("r1")
    clock.advance(LEASE + 1)
    async with asyncio.timeout(30):
        result = await holding
    assert result.end == RunEnd.SUSPENDED  # it stopped on its own and released the run
    released = await threads.get_run("r1")
    assert released.lease.owner is None
    assert released.lease.epoch == claimed.lease.epoch  # never renewed past its expiry
    assert released.lease.lease_until == 0
    assert released.turn == 0 and await committed_texts(threads) == []

    nxt = build_loop(threads, checkpoints, model, no_tools(), worker="next", clock=clock)
    done = await nxt.run("r1")
    assert done.end == RunEnd.COMPLETED
    final = await threads.get_run("r1")
    assert final.lease.epoch == claimed.lease.epoch + 1
    assert await committed_texts(threads) == [ANSWER]  # the whole turn, once
    # Resumed from everything the stalled holder streamed (its checkpoint), not restarted.
    assert model.prefixes[-1] == ANSWER[: len(ANSWER) // 2]
    assert await checkpoints.get("r1") is None
