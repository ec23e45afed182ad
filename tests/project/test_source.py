"""Where a project's awaken-s3 comes from: each PEP 610 record an installer leaves in
awaken-s3's .dist-info (a directory, editable or not; a VCS URL; an archive; none, from an
index), read from a fabricated distribution and written into the project's layer requirements
and its dev extra as the one requirement pip installs the same awaken-s3 from."""

from __future__ import annotations

import json
import tomllib
from importlib.metadata import PathDistribution
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from awaken_s3.project.cli import where_awaken_s3_comes_from
from awaken_s3.project.scaffold import ProjectSpec, project_files
from awaken_s3.project.source import InstallRecordError, Source, installed_source

COMMIT = "0123456789abcdef0123456789abcdef01234567"
SHA256 = "f" * 64


def fabricated(tmp_path: Path, record: dict[str, Any] | str | None) -> PathDistribution:
    """awaken-s3 0.3.1's .dist-info as an installer leaves it, with ``record`` as its
    direct_url.json (none: installed from an index)."""
    info = tmp_path / "site-packages" / "awaken_s3-0.3.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.4\nName: awaken-s3\nVersion: 0.3.1\n")
    if record is not None:
        text = record if isinstance(record, str) else json.dumps(record)
        (info / "direct_url.json").write_text(text)
    return PathDistribution(info)


def written(source: Source, provider: str) -> tuple[list[str], list[str]]:
    """The project's layer requirements and its dev extra, as `awaken-s3 init` writes them."""
    spec = ProjectSpec("support-desk", "support_desk", provider)  # type: ignore[arg-type]
    files = project_files(spec, source)
    layer = [
        line
        for line in files["layer/requirements.txt"].splitlines()
        if line and not line.startswith("#")
    ]
    dev = tomllib.loads(files["pyproject.toml"])["project"]["optional-dependencies"]["dev"]
    return layer, dev


# (direct_url.json, the kind read, the URL each requirement names)
RECORDS: list[tuple[dict[str, Any] | None, str, str | None]] = [
    # `pip install -e .` in a clone: the project gets the clone (built, not editable).
    (
        {"url": "file:///home/me/src/awaken-s3", "dir_info": {"editable": True}},
        "editable",
        "file:///home/me/src/awaken-s3",
    ),
    # `pipx install '.[local]'` in a clone (a path with a space, as pip quotes it).
    (
        {"url": "file:///home/me/my%20src/awaken-s3", "dir_info": {}},
        "directory",
        "file:///home/me/my%20src/awaken-s3",
    ),
    # `pipx install git+https://...@main`: the commit installed, not the branch.
    (
        {
            "url": "https://example.org/team/awaken-s3.git",
            "vcs_info": {"vcs": "git", "requested_revision": "main", "commit_id": COMMIT},
        },
        "vcs",
        f"git+https://example.org/team/awaken-s3.git@{COMMIT}",
    ),
    # A VCS install from a subdirectory of its repository.
    (
        {
            "url": "https://example.org/team/mono.git",
            "vcs_info": {"vcs": "git", "commit_id": COMMIT},
            "subdirectory": "python/awaken-s3",
        },
        "vcs",
        f"git+https://example.org/team/mono.git@{COMMIT}#subdirectory=python/awaken-s3",
    ),
    # A wheel by path: the same file, checked by the hash pip recorded.
    (
        {
            "url": "file:///srv/wheels/awaken_s3-0.3.1-py3-none-any.whl",
            "archive_info": {"hashes": {"sha256": SHA256}, "hash": f"sha256={SHA256}"},
        },
        "archive",
        f"file:///srv/wheels/awaken_s3-0.3.1-py3-none-any.whl#sha256={SHA256}",
    ),
    # An sdist by URL, recorded by an older pip (the single "hash" field only).
    (
        {
            "url": "https://example.org/dist/awaken_s3-0.3.1.tar.gz",
            "archive_info": {"hash": f"sha256={SHA256}"},
        },
        "archive",
        f"https://example.org/dist/awaken_s3-0.3.1.tar.gz#sha256={SHA256}",
    ),
    # An archive with no hash recorded.
    (
        {"url": "https://example.org/dist/awaken_s3-0.3.1.tar.gz", "archive_info": {}},
        "archive",
        "https://example.org/dist/awaken_s3-0.3.1.tar.gz",
    ),
    # No direct_url.json: from an index, pinned to the very release.
    (None, "index", None),
]


@pytest.mark.parametrize(("record", "kind", "url"), RECORDS)
@pytest.mark.parametrize(("provider", "extras"), [("bedrock", set()), ("openai", {"openai"})])
def test_each_install_record_is_written_as_the_same_requirement_in_the_layer_and_dev_extra(
    tmp_path: Path,
    record: dict[str, Any] | None,
    kind: str,
    url: str | None,
    provider: str,
    extras: set[str],
) -> None:
    source = installed_source(fabricated(tmp_path, record))
    assert (source.kind, source.version, source.url) == (kind, "0.3.1", url)

    layer, dev = written(source, provider)
    assert len(layer) == 1
    # What pip reads: the name, the provider's extra, and either the direct URL or the pin.
    deployed = Requirement(layer[0])
    assert (deployed.name, deployed.extras, deployed.url) == ("awaken-s3", extras, url)
    assert str(deployed.specifier) == ("" if url else "==0.3.1")
    tools = Requirement(dev[0])
    assert (tools.name, tools.extras, tools.url) == ("awaken-s3", {"local"}, url)
    assert tools.specifier == deployed.specifier
    assert dev[1].startswith("pytest")


def test_the_project_s_readme_and_layer_say_where_awaken_s3_comes_from(tmp_path: Path) -> None:
    source = installed_source(fabricated(tmp_path, RECORDS[1][0]))
    spec = ProjectSpec("support-desk", "support_desk", "anthropic")
    files = project_files(spec, source)
    line = "awaken-s3[anthropic] @ file:///home/me/my%20src/awaken-s3"
    readme = files["README.md"]
    assert f"```\n{line}\n```" in readme
    assert "built from the directory /home/me/my src/awaken-s3" in readme
    assert "PIP_FIND_LINKS" not in readme and "pypi.org" not in readme
    assert "built from the directory /home/me/my src/awaken-s3" in files["layer/requirements.txt"]
    assert "awaken-s3 0.3.1" in files["template.yaml"]


def test_init_warns_when_the_directory_awaken_s3_came_from_is_gone(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    source = Source("directory", "0.3.1", clone.as_uri())
    said = where_awaken_s3_comes_from(source, "anthropic")
    assert f"awaken-s3[anthropic] @ {clone.as_uri()}" in said and "warning" not in said
    clone.rmdir()
    said = where_awaken_s3_comes_from(source, "bedrock")
    assert f"  awaken-s3 @ {clone.as_uri()}\n" in said
    assert f"warning: {clone} is not there any more" in said
    # Nothing local to miss for an index pin or a remote URL.
    assert "warning" not in where_awaken_s3_comes_from(Source("index", "0.3.1"), "bedrock")
    remote = Source("vcs", "0.3.1", f"git+https://example.org/a.git@{COMMIT}")
    assert "warning" not in where_awaken_s3_comes_from(remote, "bedrock")


@pytest.mark.parametrize(
    "record",
    [
        "{not json",
        "[]",
        json.dumps({"dir_info": {}}),
        json.dumps({"url": "file:///x"}),
        json.dumps({"url": "https://example.org/a.git", "vcs_info": {"vcs": "git"}}),
        json.dumps({"url": "file:///x\nmalicious==1", "dir_info": {}}),
        json.dumps({"url": "file:///x", "dir_info": {}, "subdirectory": "a b"}),
    ],
)
def test_an_unreadable_install_record_is_one_fixed_error_and_no_project(
    tmp_path: Path, record: str
) -> None:
    with pytest.raises(InstallRecordError) as raised:
        installed_source(fabricated(tmp_path, record))
    # Fixed: nothing of the record is echoed, and it says what to do.
    assert str(raised.value).startswith("awaken-s3's install record (direct_url.json")
    assert "reinstall awaken-s3" in str(raised.value) and "malicious" not in str(raised.value)


def test_the_install_is_read_not_the_egg_info_a_build_left_in_the_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A build from a clone (pip's, sam build's) leaves awaken_s3.egg-info in it, without an
    # install record; with the clone first on the path (`python -m` run there) it comes first.
    clone = tmp_path / "clone"
    (clone / "awaken_s3.egg-info").mkdir(parents=True)
    (clone / "awaken_s3.egg-info" / "PKG-INFO").write_text(
        "Metadata-Version: 2.4\nName: awaken-s3\nVersion: 0.3.1\n"
    )
    record = RECORDS[2][0]
    fabricated(tmp_path, record)
    (tmp_path / "site-packages" / "awaken_s3-0.3.1.dist-info" / "INSTALLER").write_text("pip\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    monkeypatch.syspath_prepend(str(clone))
    assert installed_source() == Source("vcs", "0.3.1", RECORDS[2][2])
