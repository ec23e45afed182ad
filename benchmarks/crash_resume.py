"""What a crash costs: resuming the turn from its checkpoint vs restarting the request.

Run: ``.venv/bin/python benchmarks/crash_resume.py`` (about 30 s on 2 cores; ``--scale 1``
runs in model time, about 5 minutes).

One representative agent turn (12,000 input tokens of system prompt, tools and history; the
model thinks for 300 tokens, answers in 500 tokens of text, then calls two tools with 40
tokens of arguments each) is cut at every kind of point, then finished two ways, side by side:

* ``resume``: :func:`awaken_s3.open_turn` again with the same key, as a new process would
  (R1-R4 from the checkpoint);
* ``restart``: the same request sent again from the start, which is what frameworks that
  persist at message boundaries (or not at all) do.

The model is scripted (one stream event per token) and paced like a Sonnet-class model: 1 s to
the first token, then 60 tokens/s, all divided by ``--scale`` so the run is short; wall times
are printed back in model seconds. It answers a continuation the way models do without prefill:
it echoes the last words of the prefix before continuing (the seam check must trim them), and
thinks again first (``--no-rethink``: it does not). Checkpoints go to an in-memory store with a
30 ms put (an S3 PutObject), through the runner's coalescing writer (one put per second of
stream, every tool-call boundary). A kill is a process death: the turn is cancelled and nothing
it writes afterwards lands; a put in flight at the kill is lost, except in the cut "just after a
put landed".

Printed per cut: the plan the resume took; output tokens generated twice (all tokens of both
attempts minus the turn's own); input tokens sent again; model calls after the crash; wall time
from the rerun's start to the whole turn; characters duplicated or lost in the committed text
(against the model's own text); and the rerun's cost at list prices (see docs/PERFORMANCE.md for
the prices and their date) for a Claude and an OpenAI model, per 1,000 crashes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import platform
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from awaken_s3 import (
    CheckpointPolicy,
    InMemoryStreamCheckpointStore,
    Message,
    ModelRequest,
    ProviderCapabilities,
    StoredCheckpoint,
    StreamCheckpoint,
    TurnCompleted,
    open_turn,
)
from awaken_s3.errors import StreamCheckpointError
from awaken_s3.streaming.continuation import continued_prefix
from awaken_s3.streaming.events import (
    ReasoningDelta,
    ReasoningEnd,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.scripted import Hook, ScriptedProvider, ScriptStep

BASE_INPUT = 12_000
TTFT = 1.0
RATE = 60.0
PUT_LATENCY = 0.030
CHARS_PER_TOKEN = 4
KEY = "bench-run"
REQUEST = ModelRequest(model="claude-sonnet-4-5", messages=(Message.user("Plan my trip."),))
#: USD per million tokens (input, output): list prices, see docs/PERFORMANCE.md
PRICES = {"Claude Sonnet 4.5": (3.00, 15.00), "GPT-4.1": (2.00, 8.00)}

_VOCABULARY_TEXT = (
    "the a trip starts in Lisbon and goes north along coast to Porto then inland through "
    "vineyards of Douro valley where small towns offer wine tastings before train back "
    "south with stops at Coimbra university old library river views markets bakeries "
    "museums churches bridges castles beaches cliffs ferries buses tickets hours days "
    "weeks morning evening night early late best worst cheap expensive quiet busy"
)
VOCABULARY = tuple(_VOCABULARY_TEXT.split(" "))


def words(n: int, seed: int) -> list[str]:
    """Tokens of text that does not repeat itself (periodic text defeats any seam check)."""
    rng = random.Random(seed)
    return [rng.choice(VOCABULARY) + " " for _ in range(n)]


REASONING = words(300, 1)
TEXT = words(500, 2)
CALL_A = ['{"city": "', *[f"{w.strip()}-" for w in words(38, 3)], 'Lisbon"}']
CALL_B = ['{"city": "', *[f"{w.strip()}-" for w in words(38, 4)], 'Porto"}']
#: the model's whole text, against which the committed text is compared
ANSWER = "".join(TEXT)


@dataclass
class Cut:
    name: str
    #: content-event index (0-based, counting every token) before which the process dies
    at: int
    #: die when the next put starts (lost) or ends (landed) after ``at``, not at ``at``
    on_put: str | None = None


def turn_script() -> list[StreamEvent]:
    events: list[StreamEvent] = [ReasoningDelta(0, text=t) for t in REASONING]
    events += [ReasoningDelta(0, signature="sig-" + "x" * 40), ReasoningEnd(0)]
    events += [TextDelta(t) for t in TEXT]
    events.append(ToolCallStart(0, "call_a", "get_weather"))
    events += [ToolCallDelta(0, f) for f in CALL_A]
    events += [ToolCallEnd(0), ToolCallStart(1, "call_b", "get_weather")]
    events += [ToolCallDelta(1, f) for f in CALL_B]
    events += [ToolCallEnd(1), UsageEvent(BASE_INPUT, 0), StopEvent("tool_use")]
    return events


def content(event: StreamEvent) -> bool:
    return isinstance(event, TextDelta | ToolCallDelta) or (
        isinstance(event, ReasoningDelta) and bool(event.text)
    )


OUTPUT_TOKENS = sum(1 for e in turn_script() if content(e))
R_END, T_END = len(REASONING), len(REASONING) + len(TEXT)
CUTS = [
    Cut("mid-reasoning", R_END // 2),
    Cut("mid-text", R_END + len(TEXT) // 2),
    Cut("mid-text, a put in flight lost", R_END + len(TEXT) // 2, on_put="start"),
    Cut("mid-text, just after a put landed", R_END + len(TEXT) // 2, on_put="end"),
    Cut("mid-tool-arguments", T_END + len(CALL_A) // 2),
    Cut("after complete calls", OUTPUT_TOKENS - 1, on_put="end"),
]


@dataclass
class Meter:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class Model:
    """The scripted model, metered and paced; a continuation is answered with an echo of the
    prefix's last words, as models asked to continue often do."""

    name = "bench-model"

    def __init__(
        self,
        scale: float,
        meter: Meter,
        hooks: dict[int, Callable[[], object]],
        *,
        rethink: bool = True,
    ) -> None:
        self.scale, self.meter, self.hooks, self.rethink = scale, meter, hooks, rethink

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=False)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.meter.calls += 1
        extra = sum(len(m.text) for m in request.messages[len(REQUEST.messages) :])
        self.meter.input_tokens += BASE_INPUT + extra // CHARS_PER_TOKEN
        prefix = continued_prefix(request.messages)
        steps: list[ScriptStep] = []
        for i, event in enumerate(turn_script()):
            if i in self.hooks:
                steps.append(Hook(self.hooks[i]))
            if (
                prefix is not None
                and not self.rethink
                and isinstance(event, ReasoningDelta | ReasoningEnd)
            ):
                continue
            steps.append(event)
        script = ScriptedProvider([steps]).stream(request)  # skips what the prefix holds
        echo = " ".join(prefix.text.split()[-3:]) if prefix is not None else ""
        return self._paced(script, echo)

    async def _paced(
        self, script: AsyncIterator[StreamEvent], echo: str
    ) -> AsyncIterator[StreamEvent]:
        # On a schedule from the request (token i due at TTFT + i / RATE), so sleep overheads
        # do not add up over a turn.
        loop = asyncio.get_running_loop()
        start, sent = loop.time(), 0

        async def due() -> None:
            nonlocal sent
            await asyncio.sleep(max(0.0, start + (TTFT + sent / RATE) / self.scale - loop.time()))
            sent += 1

        async for event in script:
            if content(event):
                if echo and isinstance(event, TextDelta):
                    for _ in echo.split():
                        await due()
                    self.meter.output_tokens += len(echo.split())
                    yield TextDelta(echo)
                    echo = ""
                await due()
                self.meter.output_tokens += 1
            yield event


@dataclass
class DyingStore:
    """An in-memory checkpoint store behind a process that can die: after the kill nothing it
    writes lands, and a put in flight at the kill lands only when ``land_in_flight``."""

    scale: float
    inner: InMemoryStreamCheckpointStore = field(default_factory=InMemoryStreamCheckpointStore)
    dead: bool = False
    land_in_flight: bool = False
    on_put_start: Callable[[], None] | None = None
    on_put_end: Callable[[], None] | None = None

    async def get(self, run_id: str) -> StoredCheckpoint | None:
        return await self.inner.get(run_id)

    async def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        if self.dead:
            raise StreamCheckpointError("the process is dead")
        if self.on_put_start is not None:
            self.on_put_start()
        # Only a put that started after the cut was armed carries the stream up to the cut: one
        # already in flight then (started before it, on a loaded machine or at a large scale)
        # would cut "just after a put landed" at a put that holds less.
        on_end = self.on_put_end
        await asyncio.sleep(PUT_LATENCY / self.scale)
        if self.dead and not self.land_in_flight:
            raise StreamCheckpointError("lost with the process")
        version = await self.inner.put(checkpoint, expected_version=expected_version)
        if on_end is not None:
            on_end()
        return version

    async def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        await self.inner.delete(run_id, expected_version=expected_version)


@dataclass
class Rerun:
    plan: str
    wasted_output: int
    resent_input: int
    calls: int
    wall: float
    duplicated: int
    lost: int

    def dollars(self, meter: Meter, prices: tuple[float, float]) -> float:
        return (meter.input_tokens * prices[0] + meter.output_tokens * prices[1]) / 1e6


def damage(got: str) -> tuple[int, int]:
    """Characters duplicated (inserted) and lost (deleted) in ``got`` against the answer."""
    added = removed = 0
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(
        None, ANSWER, got, autojunk=False
    ).get_opcodes():
        if op in ("insert", "replace"):
            added += b2 - b1
        if op in ("delete", "replace"):
            removed += a2 - a1
    return added, removed


async def crash(cut: Cut, scale: float) -> tuple[DyingStore, Meter]:
    """The first attempt, killed at ``cut``."""
    store, meter = DyingStore(scale), Meter()
    task: asyncio.Task[object] | None = None

    def kill() -> None:
        store.dead = True
        store.land_in_flight = cut.on_put == "end"
        assert task is not None
        task.cancel()

    def arm() -> None:
        if cut.on_put == "start":
            store.on_put_start = kill
        else:
            store.on_put_end = kill

    hooks: dict[int, Callable[[], object]] = {}
    policy = CheckpointPolicy(min_interval=1.0 / scale, final_flush_timeout=5.0)
    index = 0
    for i, event in enumerate(turn_script()):
        if content(event):
            if index == cut.at:
                hooks[i] = arm if cut.on_put else kill
            index += 1
    turn = open_turn(store, KEY, Model(scale, meter, hooks), REQUEST, checkpoint_policy=policy)
    task = asyncio.ensure_future(turn.result())
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return store, meter


async def resume(
    store: DyingStore, first: Meter, scale: float, *, rethink: bool
) -> tuple[Rerun, Meter]:
    store.dead, store.on_put_start, store.on_put_end = False, None, None
    meter = Meter()
    policy = CheckpointPolicy(min_interval=1.0 / scale)
    started = time.perf_counter()
    model = Model(scale, meter, {}, rethink=rethink)
    turn = open_turn(store, KEY, model, REQUEST, checkpoint_policy=policy)
    outcome = await turn.result()
    wall = (time.perf_counter() - started) * scale
    assert isinstance(outcome, TurnCompleted), outcome
    assert [c.id for c in outcome.message.tool_uses] == ["call_a", "call_b"], outcome.message
    dup, lost = damage(outcome.message.text)
    return Rerun(
        plan=outcome.plan_kind or "-",
        wasted_output=first.output_tokens + meter.output_tokens - OUTPUT_TOKENS,
        resent_input=meter.input_tokens,
        calls=meter.calls,
        wall=wall,
        duplicated=dup,
        lost=lost,
    ), meter


async def restart(first: Meter, scale: float) -> tuple[Rerun, Meter]:
    meter = Meter()
    started = time.perf_counter()
    turn = open_turn(InMemoryStreamCheckpointStore(), KEY, Model(scale, meter, {}), REQUEST)
    outcome = await turn.result()
    wall = (time.perf_counter() - started) * scale
    assert isinstance(outcome, TurnCompleted)
    dup, lost = damage(outcome.message.text)
    return Rerun(
        "restart", first.output_tokens, meter.input_tokens, meter.calls, wall, dup, lost
    ), meter


def row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


async def main(scale: float, rethink: bool) -> None:
    print(
        f"# crash_resume: Python {platform.python_version()}, scale 1/{scale:g}, "
        f"{OUTPUT_TOKENS} output tokens per turn, {BASE_INPUT} input tokens, "
        f"the resumed model {'thinks again' if rethink else 'does not think again'}"
    )
    header = [
        "cut",
        "way",
        "plan",
        "output tokens twice",
        "input tokens re-sent",
        "model calls",
        "wall to whole turn (s)",
        "dup/lost chars",
        *[f"{name} $/1k crashes" for name in PRICES],
    ]
    print(row(header))
    print(row(["---"] * len(header)))
    for cut in CUTS:
        results: list[tuple[Rerun, Meter]] = []
        store, first = await crash(cut, scale)
        results.append(await resume(store, first, scale, rethink=rethink))
        results.append(await restart(first, scale))
        for way, (rerun, meter) in zip(("resume", "restart"), results, strict=True):
            cost = [f"{rerun.dollars(meter, p) * 1000:.2f}" for p in PRICES.values()]
            print(
                row(
                    [
                        cut.name,
                        way,
                        rerun.plan,
                        rerun.wasted_output,
                        rerun.resent_input,
                        rerun.calls,
                        f"{rerun.wall:.2f}",
                        f"{rerun.duplicated}/{rerun.lost}",
                        *cost,
                    ]
                )
            )
        ratio = results[0][0].wall / results[1][0].wall
        print(row([cut.name, "resume/restart", "", "", "", "", f"{ratio:.2f}x", "", "", ""]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scale", type=float, default=10.0, help="model time divided by this (default 10)"
    )
    parser.add_argument(
        "--no-rethink",
        action="store_true",
        help="the resumed model continues without thinking again",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="model time divided by 50 (seconds): shows the script runs, its figures mean nothing",
    )
    args = parser.parse_args()
    asyncio.run(main(50.0 if args.quick else args.scale, not args.no_rethink))
