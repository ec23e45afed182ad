"""The kill soak: many runs through the event-source emulator and the real worker handler,
with workers SIGKILLed, raced and starved of their checkpoints, then every run checked.

Faults, all seeded by ``SoakConfig.seed``:

* inside the workers (tests/soak/worker_app.py): SIGKILL around commits, between a commit
  and its checkpoint delete, around checkpoint puts, inside tools and mid-stream; failed
  checkpoint deletes (500);
* from outside: SIGKILL of a busy worker at a random moment; duplicate messages, so that
  2-4 workers race on one run (on a standard queue they are delivered at once); a
  checkpoint deleted under its live writer (what an operator's clean-up can do); a corrupt
  object planted where a checkpoint lives; a valid partial of the current turn planted with
  an epoch the run never had (what a point-in-time restore of the table leaves behind);
* the deployed sweeper (its Lambda handler, ``handlers/sweeper.py``, in a local container on a
  schedule, with the template's passes) re-sends runs whose messages went to the dead-letter
  queue (a record killed ``maxReceiveCount`` times) and would fail runs that never move, and
  deletes checkpoints that outlived their runs once they have been quiet for its grace (a
  record that ran out of receives after its worker was killed between the final commit and
  the delete leaves one); it runs once more, a grace after the last run ended;
* holders frozen (SIGSTOP) past their lease and thawed: a stalled holder must stop, not renew.

Time runs 20 times faster than with the template's defaults, every ratio kept: a 3 s lease
(60 s), a 0.5 s visibility margin (10 s), a 6 s worker timeout (120 s) and a queue visibility
timeout 1.5 s above it (30 s), the sweeper scheduled every 3 s (a minute) with 4 passes 0.75 s
apart (15 s), its grace derived from the lease and the margin as deployed. The queue is
moto's, with SQS's receipt-handle rules (awaken_s3.local.sqs_receipts); the workers are fed by
the SQS event-source emulator (Lambda's trigger), ``maxReceiveCount`` 5 as in the template.

Measured: each kill (or freeze) of a worker that left its run undriven, to the run's next claim
attempt by another worker, in lease periods, per recovery path (awaken_s3.service.liveness;
:func:`recovery_samples`).

Checked per run: it completed; every turn is committed exactly once and is the scripted
whole turn; no incomplete tool call ran; the non-idempotent tool ran at most once (and a
committed result proves it ran), the idempotent one at least once; no checkpoint is left.
Every run must end: one still running when the time limit comes is reported as stranded.
It runs on ``serial_moto`` (moto applying one request at a time; see its docstring).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aioboto3

from awaken_s3.errors import StreamCheckpointError
from awaken_s3.local.event_source import BusyWorker, FunctionConfig, SqsEventSource
from awaken_s3.local.schedule import ScheduledFunction
from awaken_s3.messages import Message, ToolResultBlock, ToolUseBlock
from awaken_s3.models import StreamCheckpoint, encode_checkpoint
from awaken_s3.runtime.tools import OUTCOME_UNKNOWN
from awaken_s3.service.liveness import Path as Path_
from awaken_s3.service.queue import RunMessage, send_run_message
from awaken_s3.settings import derived_sweep_grace
from awaken_s3.stores.s3 import S3StreamCheckpointStore
from awaken_s3.stores.s3_protocol import object_key
from awaken_s3.threads import RunSettings, RunStatus
from awaken_s3.threads.dynamo import DynamoThreadStore, create_table, dynamodb_client_config
from tests.runtime.serial_moto import serial_moto
from tests.soak.model import CONTINUE_MODEL, PREFILL_MODEL
from tests.soak.script import (
    ADD,
    LOOKUP,
    RunScript,
    ToolCallSpec,
    TurnSpec,
    assistant_message,
    prompt_for,
    script_for,
    tool_result,
)

OWNER = "soak"
BUCKET = "awaken-soak"
TABLE = "awaken-soak"
PREFIX = "checkpoints/"
REPO = Path(__file__).resolve().parents[2]
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


#: how much faster than with the template's defaults the soak's clock runs (60 s -> 3 s)
SPEED = 20.0


@dataclass(frozen=True)
class SoakConfig:
    runs: int = 16
    seed: int = 1
    #: the template's WorkerMaxConcurrency
    concurrency: int = 10
    #: initialized containers beyond it (the warm environments Lambda keeps from earlier
    #: invocations), so the soak's frequent kills rarely leave a delivery to a cold start
    spare_containers: int = 4
    #: base probability of a kill at each point inside a worker (see worker_app.WEIGHTS)
    kill_p: float = 0.02
    #: the weight of a death during init (worker_app.WEIGHTS): about one invocation in 500
    #: dies there, the others mid-work; each such death waits for the queue's visibility
    #: timeout (2.5 leases), so a run too short to hold 100 recoveries leaves them out (0)
    init_kill_weight: float = 0.1
    #: mean seconds between external actions of each kind (0: never)
    external_kill_every: float = 2.0
    pause_every: float = 10.0
    duplicate_every: float = 3.0
    delete_under_writer_every: float = 6.0
    plant_corrupt_every: float = 8.0
    plant_restored_every: float = 8.0
    #: probability that a checkpoint delete fails with a 500
    delete_fail_p: float = 0.15
    fifo: bool = False
    lease_seconds: float = 60.0 / SPEED
    visibility_margin: float = 10.0 / SPEED
    function_timeout: float = 120.0 / SPEED
    #: the template's 10 s, scaled, would leave 0.5 s for the final flush, the release and
    #: the continuation on a loaded 2-core machine: 1 s
    deadline_margin: float = 1.0
    turn_headroom: float = 40.0 / SPEED
    #: the template's WorkerTimeouts mapping: the worker timeout + 30 s
    queue_visibility_over_timeout: float = 30.0 / SPEED
    #: the deployed sweeper: scheduled every minute, 4 passes 15 s apart
    sweep_every: float = 60.0 / SPEED
    sweep_passes: int = 4
    sweep_pass_every: float = 15.0 / SPEED
    max_receive_count: int = 5
    #: a hung soak's bound; runs not ended by then are reported stranded
    time_limit: float = 600.0

    def at_speed(self, speed: float) -> SoakConfig:
        """The template's defaults, ``speed`` times faster (every ratio kept)."""
        return dataclasses.replace(
            self,
            lease_seconds=60.0 / speed,
            visibility_margin=10.0 / speed,
            function_timeout=120.0 / speed,
            turn_headroom=40.0 / speed,
            queue_visibility_over_timeout=30.0 / speed,
            sweep_every=60.0 / speed,
            sweep_pass_every=15.0 / speed,
        )

    @property
    def sweep_grace(self) -> float:
        """Derived as every deployed function derives it."""
        return derived_sweep_grace(self.lease_seconds, self.visibility_margin)

    @property
    def queue_visibility(self) -> int:
        # SQS (and moto) count visibility in whole seconds.
        return math.ceil(self.function_timeout + self.queue_visibility_over_timeout)


@dataclass
class SoakReport:
    config: SoakConfig
    runs: int = 0
    turns: int = 0
    tool_calls: int = 0
    kills_inside: Counter[str] = field(default_factory=Counter)
    kills_outside: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    plans: Counter[str] = field(default_factory=Counter)
    #: model calls that continued a saved prefix (a resume with R1 or R3, in or across
    #: processes); R2 resumes call no model
    continuations: int = 0
    rescues: int = 0
    #: invocations that ran out of time without being frozen (a worker stops a deadline
    #: margin early and a sweeper's passes fit its time, so only a machine too busy to give
    #: them its time makes them time out): the latencies then measure the machine
    starved: int = 0
    invocations: Counter[str] = field(default_factory=Counter)
    #: seconds from a kill to the first model token of the same run after it
    resume_latencies: list[float] = field(default_factory=list)
    #: each kill or freeze that left a run undriven, to the run's next claim attempt
    recoveries: list[Sample] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    duration: float = 0.0

    @property
    def kills(self) -> int:
        return sum(self.kills_inside.values()) + self.kills_outside

    def percentile(self, q: float) -> float | None:
        return percentile(self.resume_latencies, q)

    def recovery_leases(self, q: float) -> float | None:
        """A percentile of kill -> next claim over every recovery, in lease periods."""
        return percentile([r.leases for r in self.recoveries], q)

    def summary(self) -> str:
        lines = [
            f"runs {self.runs}, turns {self.turns}, tool calls {self.tool_calls}, "
            f"{self.duration:.0f}s ({'FIFO' if self.config.fifo else 'standard'} queue, "
            f"lease {self.config.lease_seconds:g}s)",
            f"kills {self.kills}: inside {dict(sorted(self.kills_inside.items()))}, "
            f"outside {self.kills_outside}",
            f"external actions {dict(sorted(self.actions.items()))}",
            f"invocations {dict(sorted(self.invocations.items()))}, "
            f"sweeper rescues {self.rescues}, "
            f"timed out unfrozen (the machine starved them) {self.starved}",
            f"plans seen (completed invocations' metrics) {dict(sorted(self.plans.items()))}, "
            f"model calls continuing a saved prefix {self.continuations}",
        ]
        if self.resume_latencies:
            p50, p99 = self.percentile(50), self.percentile(99)
            lines.append(
                f"kill -> resumed first token: n={len(self.resume_latencies)} p50={p50:.2f}s "
                f"p99={p99:.2f}s max={max(self.resume_latencies):.2f}s "
                f"(mean {statistics.fmean(self.resume_latencies):.2f}s)"
            )
        lines.extend(recovery_table(self.recoveries, lease=self.config.lease_seconds))
        lines.append(f"violations {len(self.violations)}")
        lines.extend(f"  - {v}" for v in self.violations[:50])
        return "\n".join(lines)


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile (pure)."""
    ordered = sorted(values)
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[index]


def run_id_of(seed: int) -> str:
    return f"soak-{seed}"


def thread_id_of(seed: int) -> str:
    return f"soak-thread-{seed}"


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError):
            records.append(json.loads(line))
    return records


class Soak:
    def __init__(self, config: SoakConfig, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.rng = random.Random(config.seed)
        self.report = SoakReport(config)
        self.seeds = [config.seed * 1000 + n for n in range(config.runs)]
        self.scripts = {
            run_id_of(s): script_for(s, prefill=bool(random.Random(s).getrandbits(1)))
            for s in self.seeds
        }
        self.external_kills: list[dict[str, Any]] = []
        self.pauses: list[dict[str, Any]] = []
        self.frozen: set[int] = set()
        self.thawing: set[asyncio.Task[None]] = set()
        self.ended: set[str] = set()
        #: run id -> when the harness last wrote into its checkpoint's place
        self.planted_at: dict[str, float] = {}

    # -- set-up

    def env(self, endpoint: str, queue_url: str) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": endpoint,
            **FAKE_AWS,
            "AWAKEN_BUCKET": BUCKET,
            "AWAKEN_TABLE": TABLE,
            "AWAKEN_QUEUE_URL": queue_url,
            "AWAKEN_CHECKPOINT_PREFIX": PREFIX,
            "AWAKEN_PROVIDER": "anthropic",
            "AWAKEN_MODEL": PREFILL_MODEL,
            "AWAKEN_LEASE_SECONDS": str(self.config.lease_seconds),
            "AWAKEN_VISIBILITY_MARGIN_SECONDS": str(self.config.visibility_margin),
            "AWAKEN_DEADLINE_MARGIN_SECONDS": str(self.config.deadline_margin),
            "AWAKEN_TURN_HEADROOM_SECONDS": str(self.config.turn_headroom),
            # A soak kills far more often than production: the budget must not end a run.
            "AWAKEN_MAX_INTERRUPTIONS": "1000",
            "AWAKEN_MAX_IDLE_SUSPENSIONS": "50",
            "POWERTOOLS_SERVICE_NAME": "awaken-soak",
            "POWERTOOLS_METRICS_NAMESPACE": "awaken-soak",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "SOAK_SEED": str(self.config.seed),
            "SOAK_KILL_P": str(self.config.kill_p),
            "SOAK_INIT_KILL_WEIGHT": str(self.config.init_kill_weight),
            "SOAK_DELETE_FAIL_P": str(self.config.delete_fail_p),
            "SOAK_KILLS_LOG": str(self.workdir / "kills.jsonl"),
            "SOAK_EFFECTS_LOG": str(self.workdir / "effects.jsonl"),
            "SOAK_STARTS_LOG": str(self.workdir / "starts.jsonl"),
            "SOAK_LEASES_LOG": str(self.workdir / "leases.jsonl"),
        }

    def sweeper_env(self, endpoint: str, queue_url: str) -> dict[str, str]:
        """The deployed sweeper's: the template's passes, scaled."""
        return {
            **self.env(endpoint, queue_url),
            "AWAKEN_SWEEP_PASSES": str(self.config.sweep_passes),
            "AWAKEN_SWEEP_PASS_EVERY_SECONDS": str(self.config.sweep_pass_every),
        }

    async def create_queue(self, sqs: Any) -> str:
        fifo = self.config.fifo
        suffix = ".fifo" if fifo else ""
        attrs = {"FifoQueue": "true"} if fifo else {}
        dlq = await sqs.create_queue(QueueName=f"soak-dlq{suffix}", Attributes=attrs)
        dlq_arn = (
            await sqs.get_queue_attributes(QueueUrl=dlq["QueueUrl"], AttributeNames=["QueueArn"])
        )["Attributes"]["QueueArn"]
        queue = await sqs.create_queue(
            QueueName=f"soak-runs{suffix}",
            Attributes={
                **attrs,
                "VisibilityTimeout": str(self.config.queue_visibility),
                "RedrivePolicy": json.dumps(
                    {
                        "deadLetterTargetArn": dlq_arn,
                        "maxReceiveCount": str(self.config.max_receive_count),
                    }
                ),
            },
        )
        self.dlq_url = dlq["QueueUrl"]
        return str(queue["QueueUrl"])

    async def seed_runs(self, threads: DynamoThreadStore, sqs: Any, queue_url: str) -> None:
        for seed in self.seeds:
            script = self.scripts[run_id_of(seed)]
            await threads.create_thread(thread_id_of(seed), owner=OWNER)
            settings = RunSettings(
                model=PREFILL_MODEL if script.prefill else CONTINUE_MODEL,
                tools=(ADD, LOOKUP),
                max_turns=10,
                max_tokens=1024,
            )
            await threads.create_run(
                run_id_of(seed),
                thread_id=thread_id_of(seed),
                owner=OWNER,
                settings=settings,
                messages=[Message.user(prompt_for(seed, script.prefill))],
            )
            await send_run_message(sqs, queue_url, RunMessage(run_id=run_id_of(seed)))

    # -- the chaos

    def due(self, every: float, tick: float) -> bool:
        return every > 0 and self.rng.random() < tick / every

    def live_runs(self) -> list[str]:
        return sorted(r for r in self.scripts if r not in self.ended)

    async def chaos(
        self,
        source: SqsEventSource,
        sweeper: ScheduledFunction,
        threads: DynamoThreadStore,
        s3: Any,
        sqs: Any,
        queue_url: str,
    ) -> None:
        tick = 0.2
        deadline = time.monotonic() + self.config.time_limit
        next_check = 0.0
        while time.monotonic() < deadline or self.starving(source, deadline):
            await asyncio.sleep(tick)
            now = time.monotonic()
            if now >= next_check:
                next_check = now + 1.0
                await self.refresh_ended(threads)
                if not self.live_runs():
                    # Past the limit only when the machine starved the soak: a minute more.
                    await self.drain(source, sqs, queue_url, max(deadline, time.monotonic() + 60))
                    # The deployed sweeper's next invocation: anything still left once it has
                    # been quiet for the grace outlived its run.
                    await asyncio.sleep(self.config.sweep_grace + 0.5)
                    await sweeper.invoke_now()
                    return
            live = self.live_runs()
            if self.due(self.config.external_kill_every, tick):
                self.kill_one(source)
            if self.due(self.config.pause_every, tick):
                self.pause_one(source)
            if live and self.due(self.config.duplicate_every, tick):
                run_id = self.rng.choice(live)
                for _ in range(self.rng.randint(1, 3)):
                    await send_run_message(sqs, queue_url, RunMessage(run_id=run_id))
                self.report.actions["duplicates"] += 1
            if live and self.due(self.config.delete_under_writer_every, tick):
                key = object_key(PREFIX, self.rng.choice(live))
                await s3.delete_object(Bucket=BUCKET, Key=key)
                self.report.actions["deleted_under_writer"] += 1
            if live and self.due(self.config.plant_corrupt_every, tick):
                run_id = self.rng.choice(live)
                await s3.put_object(
                    Bucket=BUCKET, Key=object_key(PREFIX, run_id), Body=b"{not a checkpoint"
                )
                self.planted_at[run_id] = time.time()
                self.report.actions["planted_corrupt"] += 1
            if live and self.due(self.config.plant_restored_every, tick):
                await self.plant_restored(threads, s3, self.rng.choice(live))

    async def drain(
        self, source: SqsEventSource, sqs: Any, queue_url: str, deadline: float
    ) -> None:
        """Every run ended; let the records still on their way be delivered (a worker killed
        between the final commit and its delete left its record to clean up after it)."""
        while time.monotonic() < deadline:
            attrs = (
                await sqs.get_queue_attributes(
                    QueueUrl=queue_url,
                    AttributeNames=[
                        "ApproximateNumberOfMessages",
                        "ApproximateNumberOfMessagesNotVisible",
                    ],
                )
            )["Attributes"]
            waiting = int(attrs["ApproximateNumberOfMessages"]) + int(
                attrs["ApproximateNumberOfMessagesNotVisible"]
            )
            if waiting == 0 and not source.busy():
                return
            await asyncio.sleep(0.5)

    def starving(self, source: SqsEventSource, deadline: float) -> bool:
        """Past the time limit, but the machine has been starving the soak (invocations nobody
        froze time out): give the runs up to twice the limit again before calling them
        stranded, since the limit is there to catch a run nobody drives, not a slow machine."""
        frozen = {pause["pid"] for pause in self.pauses}
        starved = any(r.outcome == "timeout" and r.pid not in frozen for r in source.results())
        return starved and time.monotonic() < deadline + 2 * self.config.time_limit

    def mid_work(self, source: SqsEventSource) -> list[BusyWorker]:
        """Workers busy for at least half a second. At 20 times the speed, the moments before a
        worker's first calls (which take as long as ever) would be a hundred times likelier to
        be hit than on Lambda; deaths there come from the workers' own kill points
        (``in_init``, ``before_claim``) at rates like production's."""
        now = time.time()
        return [w for w in source.busy() if now - w.started_at >= 0.5]

    def kill_one(self, source: SqsEventSource) -> None:
        busy = self.mid_work(source)
        if not busy:
            return
        worker = self.rng.choice(busy)
        victim = describe_worker(worker)
        if source.kill(worker.pid):
            self.external_kills.append({**victim, "at": time.time()})
            self.report.kills_outside += 1

    def pause_one(self, source: SqsEventSource) -> None:
        """Freeze a busy worker past its lease and its record's visibility, then thaw it."""
        busy = [w for w in self.mid_work(source) if w.pid not in self.frozen]
        if not busy:
            return
        worker = self.rng.choice(busy)
        # Just past its lease and its record's visibility: it wakes to an expired lease.
        stall = self.config.lease_seconds + self.config.visibility_margin
        seconds = stall + self.rng.uniform(0.1, 0.5)
        if not source.freeze(worker.pid):
            return
        self.frozen.add(worker.pid)
        started = time.time()
        self.pauses.append({**describe_worker(worker), "at": started, "until": started + seconds})
        self.report.actions["frozen_past_the_lease"] += 1

        async def thaw() -> None:
            await asyncio.sleep(seconds)
            source.freeze(worker.pid, frozen=False)
            self.frozen.discard(worker.pid)

        task = asyncio.create_task(thaw())
        self.thawing.add(task)
        task.add_done_callback(self.thawing.discard)

    async def plant_restored(self, threads: DynamoThreadStore, s3: Any, run_id: str) -> None:
        """A valid partial of the run's current turn under an epoch above the run's: what a
        point-in-time restore of the table leaves in the bucket."""
        run = await threads.get_run(run_id)
        script = self.scripts[run_id]
        if run.status.terminal or run.turn >= len(script.turns):
            return
        text = script.turns[run.turn].text
        checkpoint = StreamCheckpoint(
            run_id=run_id,
            thread_id=run.thread_id,
            model=run.settings.model,
            turn=run.turn,
            partial_text=text[: self.rng.randint(1, len(text))],
            epoch=run.lease.epoch + self.rng.randint(1, 5),
            writer="restored-from-backup",
        )
        await s3.put_object(
            Bucket=BUCKET, Key=object_key(PREFIX, run_id), Body=encode_checkpoint(checkpoint)
        )
        self.planted_at[run_id] = time.time()
        self.report.actions["planted_restored"] += 1

    def tally_sweeps(self, sweeper: ScheduledFunction) -> None:
        for reply in sweeper.results():
            if reply.outcome != "ok" or not isinstance(reply.response, dict):
                self.report.actions[f"sweeper_{reply.outcome}"] += 1
                self.report.starved += reply.outcome == "timeout"
                continue
            self.report.rescues += int(reply.response.get("rescued", 0))
            self.report.actions["leftovers_the_sweeper_deleted"] += int(
                reply.response.get("leftovers_deleted", 0)
            )
            self.report.actions["sweeper_passes"] += int(reply.response.get("passes", 0))
        self.report.actions["sweeper_ticks_dropped"] += sweeper.throttled

    async def refresh_ended(self, threads: DynamoThreadStore) -> None:
        for run_id in self.live_runs():
            run = await threads.get_run(run_id)
            if run.status.terminal:
                self.ended.add(run_id)

    # -- the verdict

    async def check(self, threads: DynamoThreadStore, checkpoints: S3StreamCheckpointStore) -> None:
        effects = Counter(e["call"] for e in _read_lines(self.workdir / "effects.jsonl"))
        known_effects: set[str] = set()
        for run_id, script in self.scripts.items():
            self.report.runs += 1
            self.report.turns += len(script.turns)
            for spec in script.turns:
                for call in spec.calls:
                    known_effects.add(effect_key(call))
                    self.report.tool_calls += 1
            run = await threads.get_run(run_id)
            if run.status != RunStatus.COMPLETED:
                state = "stranded (nobody drives it)" if run.status.runnable else "ended"
                error = f": {run.error.code} {run.error.message[:200]}" if run.error else ""
                self.report.violations.append(
                    f"{run_id}: {run.status.value}, {state}, lease {run.lease}{error}"
                )
            messages = await threads.load_messages(run.thread_id)
            self.report.violations.extend(
                f"{run_id}: {problem}" for problem in thread_problems(script, messages, effects)
            )
            if await checkpoint_exists(checkpoints, run_id):
                leftover = await describe_object(checkpoints, run_id)
                if self.planted_at.get(run_id, 0.0) >= run.updated_at:
                    # Planted after the run's last write: no worker could ever see it (the
                    # bucket's lifecycle rule and `checkpoints clean` are for those).
                    self.report.actions["planted_after_the_end"] += 1
                else:
                    self.report.violations.append(
                        f"{run_id}: a checkpoint is left after the run: {leftover}; the run "
                        f"ended at epoch {run.lease.epoch} turn {run.turn} at {run.updated_at:.3f}"
                        f", last plant at {self.planted_at.get(run_id, 0.0):.3f}"
                    )
        self.report.violations.extend(stray_effects(known_effects, effects))

    def tally(self) -> None:
        # Kept with the workers' logs for a post-mortem (--keep).
        with (self.workdir / "outside.jsonl").open("w", encoding="utf-8") as outside:
            for event in [*self.external_kills, *self.pauses]:
                outside.write(json.dumps(event) + "\n")
        for kill in _read_lines(self.workdir / "kills.jsonl"):
            self.report.kills_inside[kill["point"]] += 1
        for log in (self.workdir / "logs").glob("*.log"):
            for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
                if '"_aws"' not in line:
                    continue
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    blob = json.loads(line)
                    for plan in ("R1", "R2", "R3", "R4"):
                        value = blob.get(f"RecoveryPlan{plan}")
                        if value is not None:
                            values = value if isinstance(value, list) else [value]
                            self.report.plans[plan] += int(sum(values))
        starts = _read_lines(self.workdir / "starts.jsonl")
        self.report.continuations = sum(1 for start in starts if start["prefix"] > 0)
        inside = _read_lines(self.workdir / "kills.jsonl")
        self.report.resume_latencies = resume_latencies(
            [*inside, *self.external_kills], _read_lines(self.workdir / "starts.jsonl")
        )
        self.report.recoveries = recovery_samples(
            [*inside, *self.external_kills],
            self.pauses,
            _read_lines(self.workdir / "leases.jsonl"),
            lease=self.config.lease_seconds,
            max_receive_count=self.config.max_receive_count,
        )

    async def run(self) -> SoakReport:
        # Everything talks to the local server: fixed fake credentials, never a real account.
        for name, value in FAKE_AWS.items():
            os.environ[name] = value
        os.environ.pop("AWS_PROFILE", None)
        started = time.monotonic()
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        with serial_moto() as endpoint:
            session = aioboto3.Session(
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
                region_name="us-east-1",
            )
            async with clients(session, endpoint) as (db, s3, sqs):
                await s3.create_bucket(Bucket=BUCKET)
                await create_table(db, TABLE)
                queue_url = await self.create_queue(sqs)
                threads = DynamoThreadStore(
                    TABLE,
                    client=db,
                    s3_client=s3,
                    bucket=BUCKET,
                    sweep_grace=self.config.sweep_grace,
                )
                checkpoints = S3StreamCheckpointStore(BUCKET, prefix=PREFIX, client=s3)
                await self.seed_runs(threads, sqs, queue_url)
                function = FunctionConfig(
                    "tests.soak.worker_app:lambda_handler",
                    timeout=self.config.function_timeout,
                    env=self.env(endpoint, queue_url),
                    cwd=str(REPO),
                )
                source = SqsEventSource(
                    queue_url,
                    function,
                    batch_size=1,
                    max_concurrency=self.config.concurrency,
                    endpoint_url=endpoint,
                    region="us-east-1",
                    log_dir=self.workdir / "logs",
                    poll_interval=0.1,
                    # Initialized ahead of invocations (see worker_app._warm_up), with spares:
                    # a killed container's replacement takes as long to start as ever.
                    provisioned=self.config.concurrency + self.config.spare_containers,
                )
                sweeper = ScheduledFunction(
                    FunctionConfig(
                        "handlers.sweeper:lambda_handler",
                        # The template's 60 s, scaled, would kill a pass of this loaded
                        # machine's (a good part of its 0.75 s spacing, where a deployed pass
                        # takes a fraction of 15 s): twice that. A tick that comes while an
                        # invocation still runs is dropped, as reserved concurrency 1 does.
                        timeout=2 * self.config.sweep_every,
                        env=self.sweeper_env(endpoint, queue_url),
                        cwd=str(REPO),
                        name="sweeper",
                    ),
                    rate=self.config.sweep_every,
                    log_dir=self.workdir / "logs",
                )
                async with source, sweeper:
                    await self.chaos(source, sweeper, threads, s3, sqs, queue_url)
                    for task in list(self.thawing):
                        task.cancel()
                frozen = {pause["pid"] for pause in self.pauses}
                for result in source.results():
                    self.report.invocations[result.outcome] += 1
                    if result.outcome == "timeout" and result.pid not in frozen:
                        self.report.starved += 1
                self.tally_sweeps(sweeper)
                await self.check(threads, checkpoints)
        self.tally()
        self.report.duration = time.monotonic() - started
        return self.report


async def describe_object(checkpoints: S3StreamCheckpointStore, run_id: str) -> str:
    try:
        stored = await checkpoints.get(run_id)
    except StreamCheckpointError as exc:
        return f"unreadable ({exc})"
    if stored is None:
        return "gone"
    saved = stored.checkpoint
    return (
        f"turn {saved.turn} epoch {saved.epoch} writer {saved.writer[-30:]!r} "
        f"{len(saved.partial_text)} chars, updated {saved.updated_at.timestamp():.3f}"
    )


async def checkpoint_exists(checkpoints: S3StreamCheckpointStore, run_id: str) -> bool:
    try:
        return await checkpoints.get(run_id) is not None
    except StreamCheckpointError:
        return True  # something unreadable is there


def describe_worker(worker: BusyWorker) -> dict[str, Any]:
    """The run and record a busy worker works on (batch size 1)."""
    run_id = None
    with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
        run_id = json.loads(worker.bodies[0])["run_id"]
    record = worker.records[0] if worker.records else None
    return {
        "run_id": run_id,
        "pid": worker.pid,
        "message_id": record.message_id if record else None,
        "receive_count": record.receive_count if record else 0,
    }


def stray_effects(known: set[str], effects: Counter[str]) -> list[str]:
    """Tool runs no complete scripted call explains: an incomplete call was executed (pure)."""
    return [
        f"a tool ran with arguments no complete call had: {key} ({count}x)"
        for key, count in sorted(effects.items())
        if key not in known
    ]


def effect_key(call: ToolCallSpec) -> str:
    if call.name == ADD:
        return f"add:{call.input['a']}:{call.input['b']}"
    return f"lookup:{call.input['key']}"


def thread_problems(
    script: RunScript, messages: list[Message], effects: Counter[str]
) -> Iterator[str]:
    """Everything wrong with a run's committed thread (pure).

    A tool turn may be committed with a leading part of its parallel calls: a crash while a
    later call's arguments streamed leaves complete calls in the checkpoint, and R2 commits
    the turn with those and drops the rest (reported, never run). The rest of the run
    follows from the turn as committed.
    """
    if not messages or messages[0] != Message.user(script.prompt):
        yield "the thread does not start with the run's prompt"
        return
    position = 1
    for turn, spec in enumerate(script.turns):
        if position >= len(messages):
            yield f"turn {turn} was never committed"
            return
        committed = messages[position]
        calls = committed_calls(spec, committed)
        if calls is None:
            yield f"turn {turn} is not the scripted whole turn: {describe(committed, spec)}"
            calls = ()
        position += 1
        if not spec.calls:
            continue
        if position >= len(messages) or messages[position].role != "user":
            yield f"turn {turn}: its tool results were never committed"
            return
        results = {
            b.tool_use_id: b for b in messages[position].content if isinstance(b, ToolResultBlock)
        }
        if set(results) != {c.id for c in calls}:
            yield f"turn {turn}: results for {sorted(results)}, calls {[c.id for c in calls]}"
        for call in spec.calls:
            if call in calls:
                yield from call_problems(
                    turn, call, results.get(call.id), effects[effect_key(call)]
                )
            elif effects[effect_key(call)]:
                yield f"turn {turn}: dropped call {call.id} ran {effects[effect_key(call)]} times"
        position += 1
    if position != len(messages):
        yield f"{len(messages) - position} message(s) beyond the scripted run (a duplicate?)"


def committed_calls(spec: TurnSpec, committed: Message) -> tuple[ToolCallSpec, ...] | None:
    """The scripted calls ``committed`` holds when it is the whole turn, or the whole text
    with a leading part (at least one) of its calls; None for anything else."""
    if committed == assistant_message(spec):
        return spec.calls
    for kept in range(len(spec.calls) - 1, 0, -1):
        partial = TurnSpec(spec.text, spec.calls[:kept])
        if committed == assistant_message(partial):
            return spec.calls[:kept]
    return None


def call_problems(
    turn: int, call: ToolCallSpec, result: ToolResultBlock | None, ran: int
) -> Iterator[str]:
    if result is None:
        yield f"turn {turn}: call {call.id} has no committed result"
        return
    if call.name == ADD:
        if ran > 1:
            yield f"turn {turn}: non-idempotent call {call.id} ran {ran} times"
        if result.content == tool_result(call) and not result.is_error:
            if ran != 1:
                yield f"turn {turn}: call {call.id} has a result but ran {ran} times"
        elif not (result.is_error and result.content == OUTCOME_UNKNOWN):
            yield f"turn {turn}: call {call.id} has a wrong result {result.content[:80]!r}"
        return
    if ran < 1:
        yield f"turn {turn}: idempotent call {call.id} never ran"
    if result.is_error or result.content != tool_result(call):
        yield f"turn {turn}: call {call.id} has a wrong result {result.content[:80]!r}"


def describe(committed: Message, spec: TurnSpec) -> str:
    calls = [b.id for b in committed.content if isinstance(b, ToolUseBlock)]
    if committed.text == spec.text:
        return f"the text is whole; calls {calls} vs {[c.id for c in spec.calls]}"
    expected = spec.text
    got = committed.text
    common = 0
    while common < min(len(got), len(expected)) and got[common] == expected[common]:
        common += 1
    return (
        f"{len(got)} chars vs {len(expected)}, differing at {common}: "
        f"{got[max(0, common - 20) : common + 40]!r} vs "
        f"{expected[max(0, common - 20) : common + 40]!r}"
    )


def resume_latencies(kills: list[dict[str, Any]], starts: list[dict[str, Any]]) -> list[float]:
    """Per kill, seconds to the first model stream of the same run after it (kills after a
    run's last stream, e.g. before its final delete, resume no tokens and are skipped)."""
    by_run: dict[str, list[float]] = {}
    for start in starts:
        by_run.setdefault(run_id_of(int(start["seed"])), []).append(float(start["at"]))
    for times in by_run.values():
        times.sort()
    latencies = []
    for kill in kills:
        times = by_run.get(str(kill.get("run_id")), [])
        after = [t for t in times if t > float(kill["at"])]
        if after:
            latencies.append(after[0] - float(kill["at"]))
    return latencies


#: kill points at which the dead worker had not claimed the run yet
PRE_CLAIM_POINTS = {"in_init": Path_.IN_INIT, "before_claim": Path_.BEFORE_CLAIM}


@dataclass(frozen=True)
class Sample:
    """One recovery: a worker died (or froze) leaving its run undriven, and the run's next
    claim attempt by another worker came ``seconds`` later."""

    path: str
    #: what made that claim: the dead worker's own record, the sweeper's re-send, or another
    #: message (a duplicate the soak sent, a continuation)
    driver: str
    seconds: float
    lease: float
    #: of ``seconds``, from the claiming invocation's handler start to its claim (this
    #: machine's share: a cold container's imports, the first calls), when known
    start: float = 0.0

    @property
    def leases(self) -> float:
        return self.seconds / self.lease


def recovery_samples(
    kills: list[dict[str, Any]],
    pauses: list[dict[str, Any]],
    leases: list[dict[str, Any]],
    *,
    lease: float,
    max_receive_count: int,
) -> list[Sample]:
    """Kill (or freeze) -> the run's next claim attempt, per recovery path (pure).

    ``kills``/``pauses``: ``run_id``, ``pid``, ``message_id``, ``receive_count``, ``at`` (a
    worker's own kills also ``point``; pauses ``until``); ``leases``: the workers' successful
    claims (``ev`` "claim"), lease releases ("release") and batches hidden at the handler's
    start ("hidden"), with ``run_id``, ``pid``, ``message_id``, ``receive_count``, ``at``
    (claims also ``reason``, ``handler_at``). A worker that died before it claimed died
    "before the claim" when it had hidden its record, "in init" otherwise.

    A stop counts when it left the run undriven: the worker held the run's lease (its latest
    claim, for the record it worked on, with no release since), or it had not claimed yet
    and nobody else held a live lease. It ends at the run's next claim attempt by another
    worker: a successful claim, or a worker that took up the run's record and died or froze
    before it could claim (the delivery came in time; its death is a recovery of its own).
    """
    claims: dict[str, list[dict[str, Any]]] = {}
    releases: dict[str, list[dict[str, Any]]] = {}
    hidden: list[dict[str, Any]] = []
    for event in sorted(leases, key=lambda e: float(e["at"])):
        if event["ev"] == "hidden":
            hidden.append(event)
            continue
        into = claims if event["ev"] == "claim" else releases
        into.setdefault(str(event["run_id"]), []).append(event)
    stops = sorted([*kills, *pauses], key=lambda e: float(e["at"]))

    def took_its_batch(stop: dict[str, Any]) -> bool:
        """Whether the dead worker had hidden its record before it died (or it died during
        the runtime's init, as far as the queue can tell)."""
        return stop.get("point") != "in_init" and any(
            h["pid"] == stop["pid"]
            and h["message_id"] == stop.get("message_id")
            and int(h.get("receive_count") or 0) == int(stop.get("receive_count") or 0)
            and float(h["at"]) < float(stop["at"])
            for h in hidden
        )

    def claimed_in_its_invocation(stop: dict[str, Any]) -> bool:
        if stop.get("point") in PRE_CLAIM_POINTS:
            return False
        return any(
            c["pid"] == stop["pid"]
            and c["message_id"] == stop.get("message_id")
            and int(c.get("receive_count") or 0) == int(stop.get("receive_count") or 0)
            and float(c["at"]) < float(stop["at"])
            for c in claims.get(str(stop.get("run_id")), [])
        )

    pre_claim = [s for s in stops if not claimed_in_its_invocation(s)]

    def stopped(pid: Any, after: float, before: float) -> bool:
        return any(e["pid"] == pid and after < float(e["at"]) < before for e in stops)

    def released(run_id: str, pid: Any, after: float, before: float) -> bool:
        return any(
            e["pid"] == pid and after <= float(e["at"]) < before for e in releases.get(run_id, [])
        )

    def latest_claim(run_id: str, before: float) -> dict[str, Any] | None:
        earlier = [c for c in claims.get(run_id, []) if float(c["at"]) < before]
        return earlier[-1] if earlier else None

    samples: list[Sample] = []
    for stop in stops:
        run_id, at = str(stop.get("run_id")), float(stop["at"])
        latest = latest_claim(run_id, at)
        if any(stop is p for p in pre_claim):
            live_holder = (
                latest is not None
                and latest["pid"] != stop["pid"]
                and not released(run_id, latest["pid"], float(latest["at"]), at)
                and not stopped(latest["pid"], float(latest["at"]), at)
            )
            if live_holder or "until" in stop:
                continue  # nothing left undriven (or a frozen delivery, thawed to claim)
            path = Path_.BEFORE_CLAIM if took_its_batch(stop) else Path_.IN_INIT
        else:
            holds = (
                latest is not None
                and latest["pid"] == stop["pid"]
                and latest["message_id"] == stop.get("message_id")
                and not released(run_id, stop["pid"], float(latest["at"]), at)
            )
            if not holds:
                continue  # it had released the run, or the run was taken over already
            path = Path_.STALLED if "until" in stop else Path_.HOLDER_DIED
        attempts = [
            *(c for c in claims.get(run_id, []) if float(c["at"]) > at and c["pid"] != stop["pid"]),
            *(
                p
                for p in pre_claim
                if str(p.get("run_id")) == run_id
                and float(p["at"]) > at
                and p["pid"] != stop["pid"]
            ),
        ]
        if not attempts:
            continue  # the run ended without another claim (killed after its final commit)
        nxt = min(attempts, key=lambda a: float(a["at"]))
        if nxt.get("message_id") == stop.get("message_id"):
            driver = "own record"
        elif nxt.get("reason") == "rescue":
            driver = "sweeper"
        else:
            driver = "another message"
        if int(stop.get("receive_count") or 0) >= max_receive_count:
            # The record ran out of receives: its return went to the dead-letter queue.
            path = Path_.DEAD_LETTERED
        start = float(nxt["at"]) - float(nxt.get("handler_at") or nxt["at"])
        samples.append(Sample(path.value, driver, float(nxt["at"]) - at, lease, start))
    return samples


def recovery_table(samples: list[Sample], *, lease: float) -> list[str]:
    """The summary's lines: kill -> next claim per recovery path, in lease periods."""
    if not samples:
        return ["kill -> next claim: no recoveries measured"]

    def stats(values: list[float]) -> str:
        p = {q: percentile(values, q) or 0.0 for q in (50, 90, 99)}
        return f"p50 {p[50]:.2f} p90 {p[90]:.2f} p99 {p[99]:.2f} max {max(values):.2f}"

    lines = [
        f"kill -> next claim, in lease periods ({lease:g}s): n={len(samples)} "
        + stats([x.leases for x in samples]),
        "  of which the claiming worker's own start (handler to claim): "
        + stats([x.start / lease for x in samples]),
    ]
    for path in Path_:
        mine = [x for x in samples if x.path == path.value]
        if mine:
            drivers = Counter(x.driver for x in mine)
            lines.append(
                f"  {path.value:<14} n={len(mine):<4} {stats([x.leases for x in mine])}  "
                f"({', '.join(f'{d} {n}' for d, n in sorted(drivers.items()))})"
            )
    return lines


@contextlib.asynccontextmanager
async def clients(session: aioboto3.Session, endpoint: str) -> AsyncIterator[tuple[Any, Any, Any]]:
    async with (
        session.client("dynamodb", endpoint_url=endpoint, config=dynamodb_client_config()) as db,
        session.client("s3", endpoint_url=endpoint) as s3,
        session.client("sqs", endpoint_url=endpoint) as sqs,
    ):
        yield db, s3, sqs


def run_soak(config: SoakConfig, workdir: Path) -> SoakReport:
    return asyncio.run(Soak(config, workdir).run())
