"""Release-ready: one version (pyproject.toml's), a changelog section for it, and an sdist and
wheel that build from a clean tree, pass `twine check --strict` (what an index checks on
upload: the metadata and the README as it renders there) and carry what `awaken-s3 init`,
`dev` and the pytest plugin need at run time. .github/workflows/release.yml runs the same
build and check."""

from __future__ import annotations

import re
import shutil
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.project.conftest import NOT_SOURCES, ROOT, run, user_env

VERSION: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_changelog_has_an_unreleased_section_then_one_for_pyproject_s_version() -> None:
    sections = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert sections[0] == "Unreleased"
    assert VERSION in sections[1:], f"CHANGELOG.md has no section for {VERSION}"


def test_the_release_workflow_builds_checks_and_is_ready_for_trusted_publishing() -> None:
    workflow = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    assert "python -m build" in workflow and "twine check --strict" in workflow
    # The publish job waits, commented, for an index's trusted publisher.
    assert "#     id-token: write" in workflow
    assert "#     - uses: pypa/gh-action-pypi-publish@release/v1" in workflow


@pytest.mark.slow
def test_the_sdist_and_wheel_build_pass_twine_check_and_carry_what_init_needs(
    tmp_path: Path, packaging_tools: Path
) -> None:
    clone = tmp_path / "awaken-s3"
    shutil.copytree(ROOT, clone, symlinks=True, ignore=NOT_SOURCES)
    dist = tmp_path / "dist"
    # The wheel is built from the sdist (build's default), so the sdist is complete.
    run(
        [str(packaging_tools / "python"), "-m", "build", "--outdir", str(dist), "."],
        cwd=clone,
        env=user_env(),
    )
    sdist = dist / f"awaken_s3-{VERSION}.tar.gz"
    wheel = dist / f"awaken_s3-{VERSION}-py3-none-any.whl"
    assert sorted(dist.iterdir()) == [wheel, sdist]
    checked = run(
        [str(packaging_tools / "twine"), "check", "--strict", str(sdist), str(wheel)],
        cwd=tmp_path,
        env=user_env(),
    )
    assert checked.count("PASSED") == 2, checked

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"awaken_s3-{VERSION}.dist-info"
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        metadata = archive.read(f"{info}/METADATA").decode()
    # init: the stack's template (a link in the tree, a file in the wheel) and the skeleton,
    # dot-files included; dev: the console's files; type checkers: the PEP 561 marker.
    for needed in (
        "awaken_s3/project/template.yaml",
        "awaken_s3/project/skeleton/dot-gitignore.tmpl",
        "awaken_s3/project/skeleton/layer/requirements.txt.tmpl",
        "awaken_s3/project/skeleton/src/my_service/agents.py",
        "awaken_s3/dev/static/index.html",
        "awaken_s3/py.typed",
    ):
        assert needed in names, needed
    with zipfile.ZipFile(wheel) as archive:
        template = archive.read("awaken_s3/project/template.yaml")
    assert template == (ROOT / "template.yaml").read_bytes()
    # Not in the wheel: the tests, and handlers/ (a top-level package would shadow a user's).
    assert not any(n.startswith(("tests/", "handlers/")) for n in names)
    assert "awaken-s3 = awaken_s3.cli:main" in entry_points
    assert "awaken_s3 = awaken_s3.testing.plugin" in entry_points
    assert f"Version: {VERSION}\n" in metadata and "Provides-Extra: local" in metadata

    with tarfile.open(sdist) as archive:
        members = {m.name: m for m in archive.getmembers()}
    root = f"awaken_s3-{VERSION}"
    assert members[f"{root}/awaken_s3/project/template.yaml"].isfile()
    assert f"{root}/README.md" in members and f"{root}/pyproject.toml" in members
