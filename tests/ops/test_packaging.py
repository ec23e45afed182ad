"""What the wheel ships for its users' type checkers: the PEP 561 marker."""

from __future__ import annotations

import tomllib
from pathlib import Path

import awaken_s3

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_is_marked_typed_and_the_marker_is_package_data() -> None:
    # Without the marker (or with it left out of the wheel), mypy treats every import of
    # awaken_s3 as Any in a user's code, and the store's contracts check nothing there.
    assert (Path(awaken_s3.__file__).parent / "py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["awaken_s3"]
