"""A new user's whole path, from a clone of awaken-s3 to a resumed run of their own project.

awaken-s3 is installed as the README says, `pipx install '.[local]'` in a clone (a copy of
this tree, pipx and its venvs in a temporary PIPX_HOME, the command in a temporary
PIPX_BIN_DIR; pipx resolves every dependency from PyPI); that `awaken-s3 init` writes a
project; the project installs with `pip install -e '.[dev]'` in a new venv, with no index
holding awaken-s3 and no PIP_FIND_LINKS (its requirement names the clone, which pip builds);
its own tests run (awaken-s3's pytest plugin: moto, local containers, kills), and
`awaken-s3 dev` started in it with no flags serves its app: a run calls the project's tools,
its worker is killed mid-answer, and the run resumes and completes with each tool run once.

The project's venv is lean, and says why: the packages the project depends on besides
awaken-s3 are the suite's own (its site-packages, less awaken-s3, on the venv's path after the
venv's own), so pip finds them installed and fetches from PyPI only the build backends; it
must still resolve awaken-s3 itself, which no index and no path holds, from the requirement
init wrote. Resolving every dependency from PyPI is what the pipx install above, `make venv`
and the Lambda builds of `make build-check` show.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.dev.conftest import DevServer, eventually
from tests.project.conftest import NOT_SOURCES, ROOT, run, user_env

pytestmark = [pytest.mark.slow, pytest.mark.minutes]


def suite_packages_less_awaken_s3(where: Path) -> Path:
    """A directory of the suite's installed packages (links), without awaken-s3."""
    where.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        # The editable install's record and finder: the project must find no awaken-s3.
        if entry.name.startswith(("awaken_s3", "__editable__")) or entry.suffix == ".pth":
            continue
        (where / entry.name).symlink_to(entry)
    return where


def fresh_venv(where: Path, packages: Path) -> Path:
    """A venv whose path ends with ``packages``: the README's `python3 -m venv .venv`."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # A path line: added after the venv's own site-packages.
    (Path(purelib) / "suite-packages.pth").write_text(f"{packages}\n")
    return python


def installed_from(python: Path, cwd: Path) -> tuple[str, dict[str, object]]:
    """Where ``python`` imports awaken_s3 from, and its install record (PEP 610)."""
    said = run(
        [
            str(python),
            "-c",
            "import awaken_s3, importlib.metadata as m; print(awaken_s3.__file__); "
            "print(m.distribution('awaken-s3').read_text('direct_url.json'))",
        ],
        cwd=cwd,
        env=user_env(),
    )
    where, record = said.splitlines()
    return where, json.loads(record)


def test_pipx_install_then_init_then_the_project_installs_tests_and_resumes_with_no_index(
    tmp_path: Path, packaging_tools: Path, dev_server_factory: Callable[..., DevServer]
) -> None:
    env = user_env()
    clone = tmp_path / "awaken-s3"
    shutil.copytree(ROOT, clone, symlinks=True, ignore=NOT_SOURCES)

    # The README's install: the command on the user's PATH, its own venv under PIPX_HOME.
    pipx_env = env | {
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
        "USE_EMOJI": "0",
    }
    pipx = str(packaging_tools / "pipx")
    run([pipx, "install", "--python", sys.executable, ".[local]"], cwd=clone, env=pipx_env)
    awaken = tmp_path / "bin" / "awaken-s3"
    kit = tmp_path / "pipx" / "venvs" / "awaken-s3" / "bin" / "python"
    where, record = installed_from(kit, tmp_path)
    assert where.startswith(str(tmp_path / "pipx")), where
    assert record == {"url": clone.as_uri(), "dir_info": {}}

    project = tmp_path / "support-desk"
    said = run(
        [str(awaken), "init", str(project), "--provider", "anthropic"], cwd=tmp_path, env=env
    )
    assert "wrote 13 files" in said and "PIP_FIND_LINKS" not in said
    requirement = f"awaken-s3[anthropic] @ {clone.as_uri()}"
    assert f"\n  {requirement}\n" in said
    assert requirement in (project / "layer" / "requirements.txt").read_text().splitlines()

    # The project's README: a venv, `pip install -e '.[dev]'`, no index for awaken-s3.
    python = fresh_venv(project / ".venv", suite_packages_less_awaken_s3(tmp_path / "suite"))
    run([str(python), "-m", "pip", "install", "--quiet", "-e", ".[dev]"], cwd=project, env=env)
    where, record = installed_from(python, tmp_path)
    assert where.startswith(str(project / ".venv")), where
    assert record == {"url": clone.as_uri(), "dir_info": {}}  # built from the clone

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
        command=[str(python.with_name("awaken-s3"))],
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
