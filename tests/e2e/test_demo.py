"""The README's main job: ``awaken-s3 demo`` kills a worker and resumes its turn."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import pytest

from awaken_s3.demo.model import ANSWER, ContinuingModel
from awaken_s3.demo.scenario import Observed, check, resumed_usage
from awaken_s3.messages import Message
from awaken_s3.streaming.events import TextDelta
from awaken_s3.streaming.outcome import Usage
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.threads.models import Lease, RunSettings, RunState, RunStatus


@pytest.mark.slow
@pytest.mark.minutes
@pytest.mark.parametrize("log_level", [None, "CRITICAL"], ids=["default", "quiet-caller"])
def test_demo_kills_a_worker_and_commits_the_whole_turn_once(log_level: str | None) -> None:
    # The story is judged from the stored state and the workers' exits, so a caller whose
    # environment silences Powertools (a level above INFO) sees the same story.
    env = dict(os.environ)
    env.pop("POWERTOOLS_LOG_LEVEL", None)
    if log_level is not None:
        env["POWERTOOLS_LOG_LEVEL"] = log_level
    out = subprocess.run(
        [sys.executable, "-m", "awaken_s3.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SIGKILLed worker A" in out.stdout
    assert "implies plan R1" in out.stdout
    assert "worker A" in out.stdout and ": killed" in out.stdout
    assert "completed at lease epoch 2" in out.stdout
    assert f"[assistant] {ANSWER}" in out.stdout
    assert "checkpoint deleted" in out.stdout
    assert "OK: plan R1 resumed the turn" in out.stdout


def _good(*, continued_from: int = 100) -> Observed:
    tokens_in, tokens_out = resumed_usage(continued_from)
    run = RunState(
        run_id="demo-run",
        thread_id="demo-thread",
        owner="demo-user",
        settings=RunSettings(model="demo-model"),
        status=RunStatus.COMPLETED,
        turn=1,
        lease=Lease(None, 2, 0.0),
        usage=Usage(input_tokens=tokens_in, output_tokens=tokens_out),
    )
    return Observed(
        messages=[Message.user("q"), Message.assistant(ANSWER)],
        run=run,
        checkpoint_left=False,
        plan="R1",
        killed_at_chars=101,
        prefix_chars=100,
        outcomes=["killed", "ok"],
    )


def test_the_check_accepts_the_right_outcome() -> None:
    assert check(_good()) == []
    # A put the killed worker had in flight may land after the demo read the checkpoint.
    assert check(_good(continued_from=104)) == []


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"messages": [Message.user("q"), Message.assistant(ANSWER[100:])]}, "whole answer"),
        (
            {"messages": [Message.user("q"), Message.assistant(ANSWER), Message.assistant("x")]},
            "one user and one assistant",
        ),
        ({"checkpoint_left": True}, "not deleted"),
        ({"plan": "R4"}, "not R1"),
        ({"killed_at_chars": 0}, "mid-stream"),
        ({"outcomes": ["killed", "killed", "ok"]}, "not ['killed', 'ok']"),
        ({"outcomes": ["ok"]}, "not ['killed', 'ok']"),
    ],
)
def test_the_check_flags_a_wrong_thread(change: dict[str, Any], complaint: str) -> None:
    import dataclasses

    problems = check(dataclasses.replace(_good(), **change))
    assert any(complaint in p for p in problems), problems


def test_the_check_reads_the_run_item() -> None:
    import dataclasses

    good = _good()
    restarted = dataclasses.replace(
        good.run, usage=Usage(input_tokens=40, output_tokens=len(ANSWER) // 4)
    )
    taken_twice = dataclasses.replace(good.run, lease=Lease(None, 3, 0.0))
    running = dataclasses.replace(good.run, status=RunStatus.RUNNING)
    for run, complaint in (
        (restarted, "not that of a call continuing"),
        (taken_twice, "epoch 3"),
        (running, "not completed"),
    ):
        problems = check(dataclasses.replace(good, run=run))
        assert any(complaint in p for p in problems), problems


async def _collect(model: ContinuingModel, messages: list[Message]) -> str:
    request = ModelRequest(model="demo-model", messages=messages)
    chunks = [e.text async for e in model.stream(request) if isinstance(e, TextDelta)]
    return "".join(chunks)


@pytest.mark.parametrize("prefill", [True, False])
def test_the_demo_model_continues_from_either_prefix_shape(prefill: bool) -> None:
    model = ContinuingModel(delay=0)
    prefix = ANSWER[:123]
    messages = [Message.user("q"), Message.assistant(prefix)]
    if not prefill:
        messages.append(Message.user("continue exactly where the text stopped"))
    assert asyncio.run(_collect(model, messages)) == ANSWER[123:]
    assert asyncio.run(_collect(model, [Message.user("q")])) == ANSWER
