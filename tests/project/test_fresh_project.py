"""A new user's whole path, from `awaken-s3 init` to a resumed run, in a fresh virtualenv.

This checkout is installed into a new venv (a wheel built from a copy of the tree, not the
editable install the suite runs on), `awaken-s3 init` writes a project, the project is
installed, its own tests run (awaken-s3's pytest plugin: moto, local containers, kills), and
`awaken-s3 dev` started in it with no flags serves its app: a run calls the project's tools,
its worker is killed mid-answer, and the run resumes and completes with each tool run once.

The venv is lean, and says why: the packages this checkout and the project depend on are the
suite's own (the outer venv's site-packages is on the new venv's path, after its own), so
both are installed with ``--no-deps`` and nothing is downloaded but the build backend (from
pip's cache). Resolving the dependencies from an index is what `make venv` and the Lambda
builds of `make build-check` show; what this test adds is the installed package, its data
files (the skeleton, the stack template) and its entry points working outside the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.dev.conftest import DevServer, eventually

pytestmark = [pytest.mark.slow, pytest.mark.minutes]

ROOT = Path(__file__).resolve().parents[2]
#: what a fresh clone holds beside the sources, and is not copied
NOT_SOURCES = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    ".aws-sam",
)


def run(command: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def fresh_venv(where: Path) -> Path:
    """A venv without pip whose path ends with the suite's own site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # A path line: added after the venv's own site-packages; its .pth files (the suite's
    # editable install of awaken-s3) are not run, so awaken_s3 comes from the new venv only.
    (Path(purelib) / "outer-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_init_then_the_project_s_tests_then_awaken_s3_dev_with_a_kill_and_a_resume(
    tmp_path: Path, dev_server_factory: Callable[..., DevServer]
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    python = fresh_venv(tmp_path / "venv")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, symlinks=True, ignore=NOT_SOURCES)
    run([*pip, "--no-deps", str(checkout)], cwd=tmp_path, env=env)
    installed = run(
        [str(python), "-c", "import awaken_s3, sys; print(awaken_s3.__file__)"],
        cwd=tmp_path,
        env=env,
    )
    assert installed.startswith(str(tmp_path / "venv")), installed

    awaken = str(python.with_name("awaken-s3"))
    project = tmp_path / "support-desk"
    said = run([awaken, "init", str(project), "--provider", "anthropic"], cwd=tmp_path, env=env)
    assert "wrote 13 files" in said and "PIP_FIND_LINKS" in said
    run([*pip, "--no-deps", "-e", str(project)], cwd=tmp_path, env=env)

    # The project's own tests, as its README runs them, offline.
    tests = run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project, env=env)
    assert "5 passed" in tests, tests

    # `awaken-s3 dev` in the project, no flags: it finds the app in the project's pyproject.toml.
    server = dev_server_factory(
        "--lease-seconds",
        "3",
        "--sweep-interval",
        "0",
        "--scripted-delay",
        "0.03",
        command=[awaken],
        cwd=project,
        env={"PYTHONPATH": ""},
    )
    assert "app          support_desk.agents:app: agents support" in server.banner()
    with server.client() as http:
        assert http.post("/threads", json={"thread_id": "t1"}).status_code == 201
        started = http.post(
            "/threads/t1/runs", json={"message": "Where is my order A-17?", "run_id": "r1"}
        )
        assert started.status_code == 202, started.text

        def answering() -> bool:
            partial = http.get("/runs/r1/partial").json()["partial"]
            # The second turn (after the tools) has begun its answer.
            return partial is not None and "said:" in partial["text"]

        eventually(answering, what="the answer after the tools to stream")
        killed = http.post("/dev/runs/r1/kill")
        assert killed.status_code == 200, killed.text
        eventually(
            lambda: http.get("/runs/r1").json()["status"] in ("completed", "failed"),
            what="the run to end",
        )
        assert http.get("/runs/r1").json()["status"] == "completed"
        messages = http.get("/threads/t1").json()["messages"]
        internals = http.get("/dev/runs/r1").json()

    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    calls = [b["name"] for b in messages[1]["content"] if b["type"] == "tool_use"]
    assert calls == ["lookup_order", "open_ticket"]
    results = {b["tool_use_id"]: b for b in messages[2]["content"]}
    assert len(results) == 2 and not any(r["is_error"] for r in results.values())
    answer = messages[3]["content"][0]["text"]
    assert '"status": "shipped"' in answer
    # Killed mid-answer, resumed by a new worker from the checkpoint (R1), committed once.
    assert "killed" in [i["outcome"] for i in internals["invocations"]]
    assert "R1" in [w["resumed_with"] for w in internals["writers"]]
    from awaken_s3.demo.model import ANSWER

    assert answer.count(ANSWER) == 1
    assert sorted((t["name"], t["attempts"]) for t in internals["tool_calls"]) == [
        ("lookup_order", 1),
        ("open_ticket", 1),
    ]
