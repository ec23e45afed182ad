"""What a shorter worker timeout costs: hand-overs and re-sent tokens, per WorkerTimeout.

Run: ``.venv/bin/python benchmarks/invocation_slicing.py [--runs N] [--seed S]`` (about a
minute on 2 cores).

A worker invocation drives a run until ``timeout - AWAKEN_DEADLINE_MARGIN_SECONDS`` (10 s),
then hands it over: at a step boundary that costs only another invocation (the next request
would be sent anyway), but a turn cut mid-stream is resumed by a continuation call that sends
the whole thread again plus the partial turn as a prefix (R1). A longer timeout cuts fewer
turns; a shorter one bounds how long a worker that died during its init hides its record (the
queue's visibility timeout is the worker timeout + 30 s) and how long any one invocation
holds a container.

Measured with the real run loop and turn runner (in-memory stores) on a workload of agent
runs, each timeout side by side on the same seeded runs: 1-8 model turns (each but the last
ends with 1-3 tool calls whose results add to the thread), output tokens per turn log-normal
around 450 (capped at 8192), a 3,000-token prompt, the first token after 1 s, tools taking
log-normal ~1.5 s. The model streams at a fixed rate (tokens per second, two rates) on a fake
clock that the invocations' deadlines read, so a 15-minute invocation takes milliseconds and
no figure depends on the machine. Token prices: Claude Sonnet 4.5 list ($3 / M input, $15 / M
output), uncached; the extra input is what continuation calls send (a provider's prompt cache
would bill most of the re-sent thread at a tenth). The 120 s timeout is also run with a turn
headroom (``AWAKEN_TURN_HEADROOM_SECONDS``): an invocation that made progress hands the run
over instead of starting a model turn that close to its deadline. The last column but one is
the workload's token cost as a ratio to the 900 s timeout's, side by side in this run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import platform
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from awaken_s3.messages import Message
from awaken_s3.runtime.loop import RunEnd, RunLoop
from awaken_s3.runtime.tools import Tool, ToolRegistry
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore
from awaken_s3.streaming.events import (
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from awaken_s3.streaming.provider import ModelRequest, ProviderCapabilities
from awaken_s3.streaming.runner import TurnRunner
from awaken_s3.threads import InMemoryThreadStore, RunSettings

TIMEOUTS = (60, 120, 300, 600, 900)
#: AWAKEN_TURN_HEADROOM_SECONDS tried with a 120 s timeout
HEADROOMS = (20.0, 40.0, 60.0)
MARGIN = 10.0
RATES = (40.0, 80.0)
PROMPT_TOKENS = 3000
CHARS_PER_TOKEN = 4
#: tokens per streamed delta (the clock moves by that many tokens' time)
DELTA_TOKENS = 20
FIRST_TOKEN = 1.0
RESULT_TOKENS = 300
INPUT_PRICE, OUTPUT_PRICE = 3.0 / 1e6, 15.0 / 1e6


class Clock:
    """The invocations' monotonic clock: the model and the tools move it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class TurnPlan:
    tokens: int
    #: seconds each tool call of the turn takes (none: the run's last turn)
    tools: tuple[float, ...]


def plan_run(rng: random.Random) -> list[TurnPlan]:
    turns = rng.choice((1, 1, 2, 2, 3, 3, 4, 5, 6, 8))
    plans = []
    for index in range(turns):
        tokens = min(8192, max(20, int(rng.lognormvariate(math.log(450), 0.9))))
        last = index == turns - 1
        tools = (
            ()
            if last
            else tuple(
                min(60.0, rng.lognormvariate(math.log(1.5), 1.0)) for _ in range(rng.randint(1, 3))
            )
        )
        plans.append(TurnPlan(tokens, tools))
    return plans


def turn_text(run: int, turn: int, tokens: int) -> str:
    word = f"r{run}t{turn} "  # distinct per run and turn: a seam error cannot hide
    unit = (word * CHARS_PER_TOKEN)[:CHARS_PER_TOKEN]
    return unit * tokens


@dataclass
class Tally:
    calls: int = 0
    continuations: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: input tokens of continuation calls: the thread re-sent, and the prefix
    resent_thread: int = 0
    resent_prefix: int = 0


@dataclass
class PacedModel:
    """Streams each run's planned turns at ``rate`` tokens per second on ``clock``; continues
    any trailing assistant prefix (prefill)."""

    run: int
    plans: list[TurnPlan]
    rate: float
    clock: Clock
    tally: Tally
    name: str = "paced"

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=True)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        messages = list(request.messages)
        prefix = ""
        if messages and messages[-1].role == "assistant":
            prefix = messages[-1].text
            messages = messages[:-1]
        turn = sum(1 for m in messages if m.role == "assistant")
        plan = self.plans[turn]
        text = turn_text(self.run, turn, plan.tokens)
        history = PROMPT_TOKENS + sum(len(m.text) for m in messages[1:]) // CHARS_PER_TOKEN
        history += sum(RESULT_TOKENS for m in messages if m.role == "user") - RESULT_TOKENS
        prefix_tokens = len(prefix) // CHARS_PER_TOKEN
        self.tally.calls += 1
        self.tally.input_tokens += history + prefix_tokens
        if prefix:
            self.tally.continuations += 1
            self.tally.resent_thread += history
            self.tally.resent_prefix += prefix_tokens
        rest = text[len(prefix) :] if text.startswith(prefix) else text
        self.clock.advance(FIRST_TOKEN)
        step = DELTA_TOKENS * CHARS_PER_TOKEN
        for start in range(0, len(rest), step):
            chunk = rest[start : start + step]
            self.clock.advance(len(chunk) / CHARS_PER_TOKEN / self.rate)
            self.tally.output_tokens += len(chunk) // CHARS_PER_TOKEN
            await asyncio.sleep(0)
            yield TextDelta(chunk)
        for index, _seconds in enumerate(plan.tools):
            call = f"t{turn}-{index}"
            yield ToolCallStart(index, call, "work")
            yield ToolCallDelta(index, f'{{"turn": {turn}, "index": {index}}}')
            yield ToolCallEnd(index)
        yield UsageEvent(history + prefix_tokens, len(rest) // CHARS_PER_TOKEN)
        yield StopEvent("tool_use" if plan.tools else "end_turn")


def tools_for(plans: list[TurnPlan], clock: Clock) -> ToolRegistry:
    def work(turn: int, index: int) -> str:
        clock.advance(plans[turn].tools[index])
        return "r" * (RESULT_TOKENS * CHARS_PER_TOKEN)

    schema = {
        "type": "object",
        "properties": {"turn": {"type": "integer"}, "index": {"type": "integer"}},
        "required": ["turn", "index"],
    }
    return ToolRegistry([Tool("work", "Does some work.", schema, work, idempotent=True)])


@dataclass
class Outcome:
    timeout: int
    rate: float
    headroom: float = 0.0
    runs: int = 0
    invocations: int = 0
    #: invocations that ended with the run handed over
    handovers: int = 0
    tally: Tally = field(default_factory=Tally)
    wrong: int = 0

    @property
    def cost(self) -> float:
        return self.tally.input_tokens * INPUT_PRICE + self.tally.output_tokens * OUTPUT_PRICE

    @property
    def extra_cost(self) -> float:
        """The continuation calls' input, as a share of the whole workload's token cost."""
        t = self.tally
        base = t.input_tokens * INPUT_PRICE + t.output_tokens * OUTPUT_PRICE
        return (t.resent_thread + t.resent_prefix) * INPUT_PRICE / base


async def drive(run: int, plans: list[TurnPlan], out: Outcome) -> None:
    worker_timeout, rate, headroom = out.timeout, out.rate, out.headroom
    clock = Clock()
    threads = InMemoryThreadStore()
    checkpoints = InMemoryStreamCheckpointStore()
    tools = tools_for(plans, clock)
    model = PacedModel(run, plans, rate, clock, out.tally)
    run_id = f"run-{run}"
    await threads.create_thread("t", owner="bench")
    await threads.create_run(
        run_id,
        thread_id="t",
        owner="bench",
        settings=RunSettings(model="paced", tools=("work",), max_turns=20, max_tokens=8192),
        messages=[Message.user("do the work")],
    )
    for invocation in itertools.count(1):
        worker = f"w{invocation}"
        runner = TurnRunner(model, checkpoints, writer_id=worker, clock=clock)
        loop = RunLoop(
            threads,
            runner,
            checkpoints,
            tools,
            worker_id=worker,
            monotonic=clock,
            turn_headroom=headroom,
        )
        result = await loop.run(run_id, deadline=clock() + worker_timeout - MARGIN)
        out.invocations += 1
        if result.end is RunEnd.SUSPENDED:
            out.handovers += 1
            clock.advance(0.1)  # the continuation's queue hop
            continue
        if result.end is not RunEnd.COMPLETED:
            raise RuntimeError(f"run {run} ended {result.end} at timeout {worker_timeout}")
        break
    out.runs += 1
    committed = [m.text for m in await threads.load_messages("t") if m.role == "assistant"]
    expected = [turn_text(run, n, p.tokens) for n, p in enumerate(plans)]
    out.wrong += committed != expected


async def measure(runs: int, seed: int) -> list[Outcome]:
    rng = random.Random(seed)
    workload = [plan_run(rng) for _ in range(runs)]
    outcomes = []
    for rate in RATES:
        for timeout, headroom in [(t, 0.0) for t in TIMEOUTS] + [(120, h) for h in HEADROOMS]:
            out = Outcome(timeout, rate, headroom)
            for number, plans in enumerate(workload):
                await drive(number, plans, out)
            outcomes.append(out)
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="5 runs (seconds): shows the script runs, its figures mean nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.runs = 5
    started = time.monotonic()
    outcomes = asyncio.run(measure(args.runs, args.seed))
    print(f"python {platform.python_version()}, {args.runs} runs (seed {args.seed})")
    print(
        "| tokens/s | WorkerTimeout | turn headroom | hand-overs per run | turns cut "
        "mid-stream per run | re-sent thread / prefix tokens per run | extra token cost | "
        "token cost x the 900 s timeout's | an init death waits (leases) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for out in outcomes:
        t = out.tally
        reference = next(o for o in outcomes if o.rate == out.rate and o.timeout == 900)
        print(
            f"| {out.rate:g} | {out.timeout} s | {out.headroom:g} s | "
            f"{out.handovers / out.runs:.3f} | {t.continuations / out.runs:.3f} | "
            f"{t.resent_thread / out.runs:,.0f} / {t.resent_prefix / out.runs:,.0f} | "
            f"{out.extra_cost:.2%} | {out.cost / reference.cost:.3f}x | "
            f"{(out.timeout + 30) / 60:.2f} |"
        )
    per_run = sum(o.tally.output_tokens for o in outcomes[:1]) / max(1, outcomes[0].runs)
    print(
        f"\noutput tokens per run: {per_run:,.0f}; runs whose thread was wrong: "
        f"{sum(o.wrong for o in outcomes)}; {time.monotonic() - started:.0f}s"
    )
    return 1 if any(o.wrong for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
