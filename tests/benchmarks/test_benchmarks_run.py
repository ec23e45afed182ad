"""Every script in benchmarks/ runs at its smallest size (``--quick``) and prints its results.

A benchmark is a script nobody runs until someone needs its figure, so a change of the product
broke some unseen (a method the runner's checkpoint writers gained, a check of the API's).
Each runs here as its own process, as a reader would run it: it must exit 0 and print the
lines that carry its results. What those lines say is not judged: no test judges speed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
#: a number with its unit or ratio, as the scripts print them
NUM = r"[\d.,]+"
#: kinds of cut crash_resume.py prints (the plan each gets may vary with the machine's load)
CRASH_CUTS = ("mid-reasoning", "mid-text", "mid-tool-arguments", "after complete calls")


@dataclass(frozen=True)
class Bench:
    script: str
    #: regular expressions, each of which must match a line of the script's output
    lines: tuple[str, ...]
    #: more than about ten seconds at --quick
    slow: bool = False


BENCHES = (
    Bench(
        "capacity.py",
        (
            r"^first limit as deployed \(template defaults\): .* at [\d,]+ runs$",
            r"^flat prefix, every run streaming: [\d,]+ followed runs or [\d,]+ unwatched runs$",
        ),
    ),
    Bench(
        "checkpoint_listing.py",
        (
            r"^indexed stand-in, 6000 keys \(100 legacy\), 0\.0s/request$",
            rf"^flat listing\s+median\s+{NUM} s",
            rf"^256 shards, 16 at once\s+median\s+{NUM} s",
        ),
    ),
    Bench(
        "cancel_stop.py",
        (
            r"^cancel_stop: lease 6 s \(renewal every 2 s\),",
            *(
                rf"^{mechanism}, unfollowed\s+{path}\s+{NUM}\s+{NUM}\s+{NUM}\s+\d+\s+{NUM}$"
                for mechanism in ("mark", "renewal")
                for path in ("http", "websocket")
            ),
            rf"^renewal / mark, unfollowed, http: seconds mean x{NUM} max x{NUM};",
        ),
        slow=True,
    ),
    Bench(
        "code_sizes.py",
        (
            r"^# working tree: \d+ files under awaken_s3, handlers$",
            r"^largest classes$",
            r"^largest functions$",
            r"^\s+\d+\s+\S+\s+\(awaken_s3/\S+\.py:\d+\)$",
            r"^\s+\d+\s+awaken_s3/service/worker\.py$",
        ),
    ),
    Bench(
        "cold_start.py",
        (
            *(
                rf"^\s+{re.escape(module)}\s+{NUM} ms\s+{NUM}x$"
                for module in ("boto3", "handlers.worker", "handlers.api", "handlers.sweeper")
            ),
            rf"^one GetItem round trip on moto .*: {NUM} ms$",
            rf"^\s+warm invocation setup CPU .*: {NUM} ms\s+{NUM}x one round trip$",
            rf"^\s+first invocation setup CPU .*: {NUM} ms\s+{NUM}x one round trip$",
        ),
        slow=True,
    ),
    Bench(
        "crash_resume.py",
        (
            *(
                rf"^\| {cut} \| resume \| R[1-4] \| \d+ \| \d+ \| \d+ \| {NUM} \| \d+/\d+ \|"
                for cut in CRASH_CUTS
            ),
            r"^\| mid-text \| restart \| restart \| \d+ \|",
            rf"^\| mid-text \| resume/restart \|.*\| {NUM}x \|",
        ),
        slow=True,
    ),
    Bench(
        "invocation_slicing.py",
        (
            r"^python [\d.]+, 5 runs \(seed \d+\)$",
            rf"^\| 40 \| 120 s \| 40 s \| {NUM} \| {NUM} \| {NUM} / {NUM} \| {NUM}% \| {NUM}x \|",
            rf"^\| 80 \| 900 s \| 0 s \| {NUM} \|",
            r"^output tokens per run: [\d,]+; runs whose thread was wrong: \d+;",
        ),
    ),
    Bench(
        "kill_soak.py",
        (
            r"^== round 1/1 \(seed 1\)$",
            r"^violations 0$",
            r"^kill -> next claim: p99 .* lease periods: .* \(not judged with --quick\)$",
        ),
        slow=True,
    ),
    Bench(
        "live_push.py",
        (
            rf"^push \(WebSocket\)\s+{NUM}\s+{NUM}\s+{NUM}$",
            rf"^poll \(partial view\)\s+{NUM}\s+{NUM}\s+{NUM}$",
            rf"^polling / push: p50 x{NUM}, p99 x{NUM}$",
            r"^per 200-token turn: push \d+ PostToConnection .* \d+ follower queries;",
            rf"^cancel to stop \(1 runs, .*\): max {NUM} s",
        ),
        slow=True,
    ),
    Bench(
        "parallel_tools.py",
        (
            rf"^\| in memory \| {NUM} s \| {NUM} s \| \*\*{NUM}x\*\* \|$",
            rf"^\| DynamoDB \+ S3 on moto \| {NUM} s \| {NUM} s \| \*\*{NUM}x\*\* \|$",
        ),
        slow=True,
    ),
    Bench(
        "requests_per_run.py",
        (
            r"^\s+dynamodb\.TransactWriteItems\s+\d+$",
            r"^\s+s3\.PutObject\s+\d+$",
            r"^\s+\(of the dynamodb\.Query: [1-9]\d* follower look-ups on the connection table",
            rf"^billed requests per run: \d+ \(\d+ without the follower look-ups; "
            rf"with them {NUM}x\)$",
            r"^DynamoDB units per run \(estimated\): \d+ write, \d+ read$",
            rf"^resume: handler entry to the continuation's first token: median {NUM} ms",
            r"^\s+requests before the first token: .*dynamodb\.UpdateItem.*s3\.GetObject",
        ),
    ),
    Bench(
        "store_ops.py",
        (
            rf"^codec alone: encode {NUM}us, decode {NUM}us per checkpoint \(each of 50 ",
            r"^moto server \(moto_server process, http://127\.0\.0\.1:\d+\)$",
            *(
                rf"^\s+{re.escape(op)}\s+{NUM}\s+{NUM}\s+.*{NUM}x\s+{NUM}x"
                for op in ("put (replace)", "put (create)", "get", "delete")
            ),
        ),
    ),
    Bench(
        "stream_overhead.py",
        (
            *(
                rf"^{mode}\s+{NUM}\s+{NUM}\s+\d+\s+{NUM}$"
                for mode in ("none", "coalesced", "inline")
            ),
            rf"^hot path \(2000 deltas, in-memory store\): fold {NUM} us/delta, fold \+ "
            rf"coalescing offer {NUM} us/delta$",
        ),
    ),
    Bench(
        "project_build.py",
        (
            r"^round 1: layer clean [\d.]+ s, cached after an edit [\d.]+ s$",
            r"^round 1: package clean [\d.]+ s, cached after an edit [\d.]+ s$",
            r"^\s+DependenciesLayer\s+.* unzipped,\s+\d+ files,\s+.* zipped$",
            rf"^a code-edit deploy uploads, kB\s+{NUM}\s+{NUM}\s+\S+$",
        ),
        slow=True,
    ),
)

#: sam builds from PyPI: not for `make test`, which needs no network (CI's build-check may)
BUILD_OPT_IN = "AWAKEN_BENCH_BUILD"


def _environment() -> dict[str, str]:
    """The caller's environment without anything that would point a benchmark's clients at
    another endpoint or configure its handlers: each script starts and names its own."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_ENDPOINT_URL", "AWAKEN_", "POWERTOOLS_"))
    }


def _params() -> list[object]:
    return [
        pytest.param(bench, id=bench.script, marks=[pytest.mark.slow] if bench.slow else [])
        for bench in BENCHES
    ]


def test_every_benchmark_script_is_run_here() -> None:
    scripts = {path.name for path in BENCHMARKS.glob("*.py")}
    assert scripts == {bench.script for bench in BENCHES}


@pytest.mark.parametrize("bench", _params())
def test_a_benchmark_runs_at_its_smallest_size(bench: Bench) -> None:
    if bench.script == "project_build.py":
        if os.environ.get(BUILD_OPT_IN) != "1":
            pytest.skip(f"sam builds from PyPI: set {BUILD_OPT_IN}=1 (needs make infra)")
        if not (ROOT / ".venv-infra" / "bin" / "sam").exists():
            pytest.skip("needs make infra (.venv-infra/bin/sam)")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / bench.script), "--quick"],
        cwd=ROOT,
        env=_environment(),
        capture_output=True,
        text=True,
        # Not a judgement of speed: a hung script must not hang the suite.
        timeout=1800,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-4000:]}"
    lines = done.stdout.splitlines()
    missing = [p for p in bench.lines if not any(re.search(p, line) for line in lines)]
    assert not missing, f"no line matches {missing}\n{done.stdout}"
