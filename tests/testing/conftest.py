"""The plugin's fixtures, overridden as a user's conftest.py would: the app under test and the
tools' environment."""

from __future__ import annotations

import pytest


@pytest.fixture
def awaken_app() -> str:
    return "tests.testing.desk:app"


@pytest.fixture
def awaken_env() -> dict[str, str]:
    return {"TICKETS_QUEUE": "billing"}
