"""Fixtures of the provider tests: scripted wire servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.providers.wire.server import WireServer


@pytest.fixture
async def wire() -> AsyncIterator[WireServer]:
    server = WireServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
