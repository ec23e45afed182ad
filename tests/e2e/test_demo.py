"""The README's main job: ``awaken-s3 demo`` kills a worker and resumes its turn."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

from awaken_s3.demo.model import ANSWER, ContinuingModel
from awaken_s3.demo.scenario import Observed, check
from awaken_s3.messages import Message
from awaken_s3.streaming.events import TextDelta
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.threads.models import RunSettings, RunState, RunStatus


@pytest.mark.slow
def test_demo_kills_a_worker_and_commits_the_whole_turn_once() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "awaken_s3.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SIGKILLed worker A" in out.stdout
    assert "recovery plan(s) ['R1']" in out.stdout
    assert f"[assistant] {ANSWER}" in out.stdout
    assert "checkpoint deleted" in out.stdout


def _good() -> Observed:
    run = RunState(
        run_id="demo-run",
        thread_id="demo-thread",
        owner="demo-user",
        settings=RunSettings(model="demo-model"),
        status=RunStatus.COMPLETED,
        turn=1,
    )
    return Observed(
        messages=[Message.user("q"), Message.assistant(ANSWER)],
        run=run,
        checkpoint_left=False,
        plans=["R1"],
        killed_at_chars=100,
    )


def test_the_check_accepts_the_right_outcome() -> None:
    assert check(_good()) == []


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"messages": [Message.user("q"), Message.assistant(ANSWER[100:])]}, "whole answer"),
        (
            {"messages": [Message.user("q"), Message.assistant(ANSWER), Message.assistant("x")]},
            "one user and one assistant",
        ),
        ({"checkpoint_left": True}, "not deleted"),
        ({"plans": ["R4"]}, "not ['R1']"),
        ({"killed_at_chars": 0}, "mid-stream"),
    ],
)
def test_the_check_flags_a_wrong_thread(change: dict[str, Any], complaint: str) -> None:
    import dataclasses

    problems = check(dataclasses.replace(_good(), **change))
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
