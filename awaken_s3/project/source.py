"""Where the running awaken-s3 was installed from, as the requirement a new project names it by.

A project that ``awaken-s3 init`` writes depends on awaken-s3 twice: its functions' layer
(``layer/requirements.txt``, which ``sam build`` installs and ``pyproject.toml`` reads) and its
``dev`` extra. Both must install wherever the awaken-s3 that wrote them could be installed
from, with nothing else to set up: no index need hold awaken-s3, no ``PIP_FIND_LINKS``. pip
(and pipx, uv) record that origin in the installed distribution's ``direct_url.json``
(PEP 610); :func:`installed_source` reads it, and :meth:`Source.requirement` writes the same
origin back as a PEP 508 requirement:

* a local directory, a clone (``pipx install .``, ``pip install -e .``): ``dir_info``, a
  ``file://`` URL -> ``awaken-s3[extras] @ file:///path/to/clone``;
* a VCS URL: ``vcs_info`` -> ``awaken-s3[extras] @ git+https://...@<commit>``, pinned to the
  commit that was installed, not the branch or tag that named it then;
* an archive, a wheel or an sdist by path or URL: ``archive_info`` ->
  ``awaken-s3[extras] @ <url>#sha256=<hash>`` (the hash pip recorded, when it did);
* no ``direct_url.json``: installed from an index -> ``awaken-s3[extras]==<version>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.metadata import Distribution, distributions
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import unquote, urlsplit

from awaken_s3.errors import AwakenError

DISTRIBUTION: Final = "awaken-s3"
#: the hashes pip can check on a direct URL, strongest first
_HASH_NAMES: Final = ("sha512", "sha384", "sha256", "sha224", "sha1", "md5")

_NOT_INSTALLED: Final = (
    "awaken-s3 is not installed, so there is no telling where a project should install it "
    "from: install it (pipx install '.[local]' in a clone) and run that awaken-s3 init"
)
_UNREADABLE: Final = (
    "awaken-s3's install record (direct_url.json in its .dist-info) cannot be read; "
    "reinstall awaken-s3 (pipx reinstall awaken-s3, or pip install --force-reinstall)"
)


Kind = Literal["index", "directory", "editable", "vcs", "archive"]


class InstallRecordError(AwakenError, ValueError):
    """awaken-s3's own install record (``direct_url.json``) cannot be read (fixed message)."""


@dataclass(frozen=True)
class Source:
    """How awaken-s3 was installed: from an index (``url`` is None) or a direct URL."""

    kind: Kind
    version: str
    #: the PEP 508 direct reference (VCS prefix, commit, hash and subdirectory included)
    url: str | None = None

    def requirement(self, *extras: str) -> str:
        """``awaken-s3[extras] @ <url>``, or ``awaken-s3[extras]==<version>`` from an index."""
        name = DISTRIBUTION + (f"[{','.join(extras)}]" if extras else "")
        return f"{name} @ {self.url}" if self.url else f"{name}=={self.version}"

    def local_path(self) -> Path | None:
        """The file or directory a ``file://`` source names, on this machine (else None)."""
        if self.url is None or not self.url.startswith("file:"):
            return None
        return Path(unquote(urlsplit(self.url).path))

    def describe(self) -> str:
        """One line for the user: where the project's awaken-s3 will come from."""
        where = self.local_path()
        if self.kind == "index":
            return f"awaken-s3 {self.version} from the package index"
        if self.kind in ("directory", "editable") and where is not None:
            return f"awaken-s3 {self.version} built from the directory {where}"
        if self.kind == "vcs":
            return f"awaken-s3 {self.version} from {self.url}"
        return f"awaken-s3 {self.version} from the archive {where or self.url}"


def installed_source(dist: Distribution | None = None) -> Source:
    """Where ``dist`` (default: the awaken-s3 this code runs from) was installed from."""
    if dist is None:
        dist = _installed()
    version = dist.version
    text = dist.read_text("direct_url.json")
    if text is None:
        return Source("index", version)
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise InstallRecordError(_UNREADABLE) from exc
    if not isinstance(record, dict) or not isinstance(record.get("url"), str):
        raise InstallRecordError(_UNREADABLE)
    kind, url = _direct_reference(record)
    subdirectory = record.get("subdirectory")
    if isinstance(subdirectory, str) and subdirectory:
        url += ("&" if "#" in url else "#") + f"subdirectory={subdirectory}"
    if any(c.isspace() or not c.isprintable() for c in url):
        # One requirement line: a URL never spans two (pip writes a space as %20).
        raise InstallRecordError(_UNREADABLE)
    return Source(kind, version, url)


def _installed() -> Distribution:
    """awaken-s3 as an installer installed it: the first on the path that has an INSTALLER
    record (PEP 627), before the ``awaken_s3.egg-info`` a build leaves in a clone, which
    shadows the install when the clone is the working directory (``python -m``)."""
    found = list(distributions(name=DISTRIBUTION))
    for dist in found:
        if dist.read_text("INSTALLER") is not None:
            return dist
    if not found:  # a source tree run without being installed
        raise InstallRecordError(_NOT_INSTALLED)
    return found[0]


def _direct_reference(record: dict[str, Any]) -> tuple[Kind, str]:
    url: str = record["url"]
    if isinstance(vcs := record.get("vcs_info"), dict):
        if not isinstance(vcs.get("vcs"), str) or not isinstance(vcs.get("commit_id"), str):
            raise InstallRecordError(_UNREADABLE)
        # The commit, not requested_revision: a branch or tag moves, the commit installed
        # here does not.
        return "vcs", f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
    if isinstance(archive := record.get("archive_info"), dict):
        return "archive", url + _hash_fragment(archive)
    if isinstance(directory := record.get("dir_info"), dict):
        return ("editable" if directory.get("editable") is True else "directory"), url
    raise InstallRecordError(_UNREADABLE)


def _hash_fragment(archive: dict[str, Any]) -> str:
    """``#sha256=...``: pip checks it, so the project installs that very file."""
    hashes = archive.get("hashes")
    if isinstance(hashes, dict):
        for name in _HASH_NAMES:
            if isinstance(hashes.get(name), str):
                return f"#{name}={hashes[name]}"
    legacy = archive.get("hash")  # PEP 610's older single "name=value" field
    if isinstance(legacy, str) and legacy.partition("=")[0] in _HASH_NAMES:
        return f"#{legacy}"
    return ""
