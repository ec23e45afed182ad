"""benchmarks/capacity.py --quick runs, and its model says what docs/SCALING.md says."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _capacity() -> ModuleType:
    spec = importlib.util.spec_from_file_location("capacity", ROOT / "benchmarks" / "capacity.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["capacity"] = module
    spec.loader.exec_module(module)
    return module


def test_quick_run_prints_the_table_and_the_first_limits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _capacity().main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "S3 PUT, 256 hashed prefixes" in out
    assert (
        "first limit as deployed (template defaults): Lambda concurrent workers at 10 runs" in out
    )


def test_the_model_scales_linearly_and_sharding_lifts_the_s3_ceiling_256_fold() -> None:
    capacity = _capacity()
    load = capacity.Load(runs=1_000, followed=1.0, streaming_share=1.0, turn_seconds=30.0)
    rows = {r.resource: r for r in capacity.model(load, put_unwatched=1.0, put_followed=10.0)}
    flat, sharded = rows["S3 PUT, one flat prefix (before)"], rows["S3 PUT, 256 hashed prefixes"]
    # Every run followed and streaming at the push cadence: 10 PUT/s each.
    assert flat.rate == pytest.approx(10_000)
    assert flat.runs_at_limit == pytest.approx(350)
    assert sharded.runs_at_limit == pytest.approx(350 * 256)
    double = capacity.model(
        capacity.Load(runs=2_000, followed=1.0, streaming_share=1.0, turn_seconds=30.0),
        put_unwatched=1.0,
        put_followed=10.0,
    )
    assert double[0].rate == pytest.approx(2 * flat.rate)
    assert double[0].runs_at_limit == pytest.approx(flat.runs_at_limit)
