"""Suite-wide settings and fixtures. An area's conftest adds only what that area needs.

Servers are session-scoped: under pytest-xdist each worker process starts its own on first
use and stops it at the end (a server process by its PID). Tests sharing a server isolate
themselves with fresh buckets, tables and queues (``tests.fixtures.aws.fresh_target``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from awaken_s3.local.moto import MotoServer
from tests.fixtures.aws import threaded_moto
from tests.fixtures.clock import FakeClock

# Never let a test reach real AWS with a developer's credentials. Set at import, before any
# test module is collected: every session and client is built later (tests.fixtures.aws).
for _name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
    os.environ.pop(_name, None)
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.pop("AWS_ENDPOINT_URL", None)

# No time limit on a property's example: Hypothesis's default (200 ms) fails an example that a
# loaded machine slowed down, which would make the suite's verdict depend on the machine.
settings.register_profile("awaken", deadline=None)
settings.load_profile("awaken")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The runs of minutes first, in their order, then every other test in its own.

    pytest-xdist (``--dist loadgroup``, as the Makefile runs it) hands tests out in this order, a
    few at a time per worker: the long runs start at once on different workers, and the short
    tests fill the workers around them, so no long run is left running alone at the end. The sort
    is stable and the same on every worker, so each collects the same list, as xdist requires.
    """
    for item in items:
        if item.get_closest_marker("minutes") and not item.get_closest_marker("slow"):
            # `make test` deselects slow tests: a run of minutes must never slip into it.
            raise pytest.UsageError(f"{item.nodeid} is marked minutes but not slow")
    items.sort(key=lambda item: item.get_closest_marker("minutes") is None)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """moto in a process of its own: what worker processes, handlers and CLIs talk to."""
    with MotoServer.start() as server:
        yield server


@pytest.fixture(scope="session")
def moto_inprocess_url() -> Iterator[str]:
    """moto in a thread of the test process (a second, independent server)."""
    with threaded_moto() as server:
        yield server.endpoint_url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
