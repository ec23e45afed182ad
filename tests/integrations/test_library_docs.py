"""docs/LIBRARY.md's examples, as a user runs them: each program is started, SIGKILLed
mid-answer and run again with the same checkpoint directory, and must print the whole answer.

The docs show the example files verbatim, so what is tested is what is read."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.integrations.processes import REPO, kill_when, run
from tests.providers.wire.dialects import API_KEY, by_name
from tests.providers.wire.server import STALL, WireServer

DOC = REPO / "docs" / "LIBRARY.md"
EXAMPLES = ["own_loop.py", "strands_agent.py", "pydantic_ai_agent.py"]


def shown(name: str) -> str:
    """The code block docs/LIBRARY.md shows under ``<!-- example: NAME -->``."""
    match = re.search(
        rf"<!-- example: docs/examples/{re.escape(name)} -->\s*```python\n(.*?)```",
        DOC.read_text(),
        re.DOTALL,
    )
    assert match is not None, f"docs/LIBRARY.md does not show {name}"
    return match.group(1)


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_docs_show_each_example_file_as_it_is(name: str) -> None:
    assert shown(name) == (REPO / "docs" / "examples" / name).read_text()


def test_the_own_loop_example_is_under_30_lines() -> None:
    assert len(shown("own_loop.py").splitlines()) < 30


@pytest.mark.slow
async def test_the_own_loop_example_killed_and_run_again_commits_the_whole_story(
    tmp_path: Path,
) -> None:
    argv = [sys.executable, str(REPO / "docs" / "examples" / "own_loop.py"), str(tmp_path)]
    saved: list[str] = []

    def has_text(checkpoint: object) -> bool:
        text = getattr(checkpoint, "partial_text", "")
        saved.append(text)
        return len(text) > 40

    await kill_when(argv, has_text, directory=tmp_path, key="story-1")
    out = await run(argv)
    story = " ".join(f"word{i}" for i in range(300)) + "."
    assert json.loads(out.strip().splitlines()[-1]) == {"committed": story}
    printed = out.strip().splitlines()[0]
    # The rerun showed the saved text at once, then the rest: the whole story, once.
    assert printed.startswith(f"[R1] {saved[-1]}") and printed == f"[R1] {story}"
    assert not (tmp_path / "story-1.ckpt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["strands_agent.py", "pydantic_ai_agent.py"])
async def test_each_framework_example_killed_in_its_answer_resumes_it_and_asks_nothing_again(
    name: str, tmp_path: Path
) -> None:
    """The example runs the tool, is killed in its final answer and run again with the
    same run id: its conversation (saved by the framework) brings the tool's result back,
    so the rerun's only request continues the cut answer."""
    d = by_name("anthropic")
    wire = WireServer()
    await wire.start()
    try:
        env = {"ANTHROPIC_BASE_URL": wire.url, "ANTHROPIC_API_KEY": API_KEY}
        argv = [sys.executable, str(REPO / "docs" / "examples" / name), str(tmp_path), "run-1"]
        call = [("call_1", "get_weather", ['{"city": "Paris"}'], True)]
        prefix = "It is 18C and cloudy in Paris, "
        wire.push(
            d.stream(d.start(), d.tools(call, first_block=0), d.end("tool_use")),
            d.stream(d.start(), d.text(["It is 18C ", "and cloudy ", "in Paris, "]), [STALL]),
        )
        await kill_when(
            argv,
            lambda c: c.partial_text == prefix,
            directory=tmp_path,
            key="weather-run-1",
            env=env,
        )
        wire.push(d.text_turn(["with rain ", "later."]))
        out = await run(argv, env)
        assert out.strip().splitlines()[-1] == "It is 18C and cloudy in Paris, with rain later."
        assert len(wire.received) == 3  # the rerun continued the saved text, once
        sent = wire.received[2].json()["messages"]
        results = [b for m in sent if isinstance(m["content"], list) for b in m["content"]]
        assert [b["tool_use_id"] for b in results if b.get("type") == "tool_result"] == ["call_1"]
        assert not (tmp_path / "weather-run-1.ckpt").exists()
    finally:
        await wire.stop()
