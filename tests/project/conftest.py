"""The project tests start `awaken-s3 dev` as the dev tests do (their fixture, by PID), and the
end-to-end ones install as a user does, with the packaging tools from PyPI (pipx, build,
twine) in a throwaway venv of their own: none of them is a dependency of awaken-s3."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dev.conftest import dev_server_factory

__all__ = ["NOT_SOURCES", "ROOT", "dev_server_factory", "run", "user_env"]

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
#: the packaging tools, each bounded below its next major
TOOLS = ("pipx>=1.7,<2", "build>=1.2,<2", "twine>=6.1,<7")


def user_env() -> dict[str, str]:
    """This environment as a user's shell has it: nothing that points pip at a wheel
    directory, nothing of the suite's own Python setup."""
    drop = ("PYTHONPATH", "PYTEST_ADDOPTS", "PIP_FIND_LINKS", "PIP_NO_INDEX", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if k not in drop}


def run(command: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def packaging_tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ directory of a venv with pipx, build and twine."""
    venv = tmp_path_factory.mktemp("packaging-tools")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *TOOLS],
        cwd=venv,
        env=user_env(),
    )
    return venv / "bin"
