"""The pytest plugin of awaken-s3 (entry point ``pytest11``: ``awaken_s3``).

Fixtures:

* ``awaken``: a :class:`~awaken_s3.testing.harness.Harness` serving the project's app on the
  session's moto server, fresh resources for each test, stopped after it.
* ``awaken_app``: the app, ``MODULE:ATTRIBUTE``; by default ``[tool.awaken-s3] app`` in the
  pyproject.toml of the test session's root directory (what ``awaken-s3 dev`` serves too).
  Override it in a conftest.py to test another app.
* ``awaken_env``: the tools' environment variables in the workers (default none); override it
  to give your tools their settings, as the template's ToolEnvironment does on Lambda.
* ``awaken_moto``: the moto server (S3, DynamoDB, SQS, and any other service your tools call)
  on 127.0.0.1, one per test session (per xdist worker), stopped by its PID.

Importing this module is cheap: every fixture imports what it needs when a test uses it, so a
test session that uses none of them pays nothing for the plugin.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from awaken_s3.local.moto import MotoServer
    from awaken_s3.testing.harness import Harness


@pytest.fixture(scope="session")
def awaken_moto() -> Iterator[MotoServer]:
    from awaken_s3.local.moto import MotoServer

    with MotoServer.start() as server:
        yield server


@pytest.fixture
def awaken_app(request: pytest.FixtureRequest) -> str:
    from awaken_s3.dev.cli import project_app

    root = request.config.rootpath
    reference = project_app(root)
    if reference is None:
        pytest.fail(
            f"awaken_s3.testing: no app to test; set [tool.awaken-s3] app = "
            f'"MODULE:ATTRIBUTE" in {root / "pyproject.toml"}, or override the awaken_app '
            "fixture",
            pytrace=False,
        )
    return reference


@pytest.fixture
def awaken_env() -> dict[str, str]:
    return {}


@pytest.fixture
def awaken(
    request: pytest.FixtureRequest,
    awaken_moto: MotoServer,
    awaken_app: str,
    awaken_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Harness]:
    from awaken_s3.testing.harness import Harness

    harness = Harness(
        awaken_app,
        endpoint_url=awaken_moto.endpoint_url,
        directory=tmp_path_factory.mktemp("awaken"),
        root=request.config.rootpath,
        env=awaken_env,
    )
    with harness:
        yield harness
