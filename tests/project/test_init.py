"""`awaken-s3 init DIR`, run as a user runs it (the installed command): a project of the user's
own that depends on awaken-s3 with the provider's extra, whose app `awaken-s3 dev` and the
tests find from its pyproject.toml, whose three entry points import the app, and which is
never written over an existing file."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from awaken_s3.dev.cli import project_app
from tests.infra.cfn import load_template

AWAKEN = str(Path(sys.executable).with_name("awaken-s3"))
ROOT = Path(__file__).resolve().parents[2]


def init(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AWAKEN, "init", *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("provider", "extra"), [("bedrock", ""), ("anthropic", "[anthropic]"), ("openai", "[openai]")]
)
def test_init_writes_a_project_that_depends_on_awaken_s3_with_the_provider_s_extra(
    tmp_path: Path, provider: str, extra: str
) -> None:
    project = tmp_path / "support-desk"
    done = init(str(project), "--provider", provider)
    assert done.returncode == 0, done.stderr
    config = tomllib.loads((project / "pyproject.toml").read_text())
    assert config["project"]["name"] == "support-desk"
    # One list of dependencies: the layer's, which pyproject.toml reads.
    assert config["project"]["dynamic"] == ["dependencies"]
    assert config["tool"]["setuptools"]["dynamic"]["dependencies"] == {
        "file": ["layer/requirements.txt"]
    }
    requirements = [
        line
        for line in (project / "layer/requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    # awaken-s3 from where the command that wrote the project was installed: the suite's is
    # an editable install of this checkout, so the checkout, which pip and sam build install
    # with no index holding awaken-s3.
    (installed,) = Path(sysconfig.get_paths()["purelib"]).glob("awaken_s3-*.dist-info")
    record = json.loads((installed / "direct_url.json").read_text())
    checkout = record["url"]
    assert record["dir_info"] == {"editable": True}
    assert Path(unquote(urlsplit(checkout).path)).resolve() == ROOT
    assert requirements == [f"awaken-s3{extra} @ {checkout}"]
    assert config["project"]["optional-dependencies"]["dev"][0] == f"awaken-s3[local] @ {checkout}"
    # `awaken-s3 dev` and the tests find the app without flags.
    assert project_app(project) == "support_desk.agents:app"
    samconfig = tomllib.loads((project / "samconfig.toml").read_text())
    overrides = samconfig["default"]["deploy"]["parameters"]["parameter_overrides"]
    assert f"Provider={provider}" in overrides
    if provider == "bedrock":
        model = load_template()["Parameters"]["Model"]["Default"]
        assert f"Model={model}" in overrides  # the stack's own Bedrock default
    else:
        assert f"ApiKeyParameterName=/support-desk/{provider}-api-key" in overrides
    # The output names that requirement, and asks for nothing to be set.
    assert f"\n  awaken-s3{extra} @ {checkout}\n" in done.stdout
    assert f"built from the directory {unquote(urlsplit(checkout).path)}" in done.stdout
    assert "PIP_FIND_LINKS" not in done.stdout


def test_the_app_has_one_agent_two_tools_and_three_entry_points_of_two_lines(
    tmp_path: Path,
) -> None:
    project = tmp_path / "desk"
    assert init(str(project)).returncode == 0
    package = project / "src" / "desk"
    agents = ast.parse((package / "agents.py").read_text())
    tools = [
        node.name
        for node in agents.body
        if isinstance(node, ast.FunctionDef)
        and any("tool" in ast.unparse(d) for d in node.decorator_list)
    ]
    assert tools == ["lookup_order", "open_ticket"]
    for module, method in (("worker", "worker"), ("api", "api"), ("sweeper", "sweeper")):
        code = [
            line
            for line in (package / "handlers" / f"{module}.py").read_text().splitlines()
            if line and not line.startswith(('"""', "#"))
        ]
        assert code == ["from desk.agents import app", f"lambda_handler = app.{method}_handler()"]
    assert (project / "tests" / "test_agent.py").is_file()
    readme = (project / "README.md").read_text()
    for command in ("pip install -e '.[dev]'", "pytest", "awaken-s3 dev", "sam build"):
        assert command in readme
    assert "{{" not in readme and "my_service" not in readme and "my-service" not in readme


def test_init_refuses_to_write_over_any_existing_file_and_then_writes_nothing(
    tmp_path: Path,
) -> None:
    project = tmp_path / "desk"
    (project / "src").mkdir(parents=True)
    (project / "README.md").write_text("mine\n")
    done = init(str(project))
    assert done.returncode == 2
    assert "already has README.md" in done.stderr and "nothing was written" in done.stderr
    assert (project / "README.md").read_text() == "mine\n"
    assert sorted(p.name for p in project.rglob("*")) == ["README.md", "src"]
    # A directory that holds other things (a git checkout, say) is fine.
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    assert init(str(other)).returncode == 0


def test_names_that_cannot_be_a_package_are_refused_with_what_to_do(tmp_path: Path) -> None:
    done = init(str(tmp_path / "2fast"))
    assert done.returncode == 2 and "--package" in done.stderr
    assert init(str(tmp_path / "2fast"), "--package", "fast").returncode == 0
    assert (tmp_path / "2fast" / "src" / "fast" / "agents.py").is_file()
    done = init(str(tmp_path / "x"), "--package", "awaken_s3")
    assert done.returncode == 2 and "may not be called" in done.stderr
    assert not (tmp_path / "x").exists()
