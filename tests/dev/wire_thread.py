"""The provider tests' wire server (tests/providers/wire/) on an event loop of its own thread,
for synchronous tests: ``awaken-s3 dev --provider openai`` streams from it with the real SDK.

:func:`openai_wire` yields it ready; ``stop()`` closes its port, after which every connection
to it is refused (a provider that went away)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tests.providers.wire.dialects import OpenAIDialect
from tests.providers.wire.server import Scripted, WireServer

_T = TypeVar("_T")
#: an upper bound only a hung test reaches
HUNG = 90.0


class ThreadedWire:
    def __init__(self) -> None:
        self.dialect = OpenAIDialect()
        self.server = WireServer()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="wire", daemon=True)
        self.stopped = False

    def _call(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=HUNG)

    def start(self) -> None:
        self._thread.start()
        self._call(self.server.start())

    @property
    def base_url(self) -> str:
        """What ``AWAKEN_OPENAI_BASE_URL`` takes."""
        return f"{self.server.url}/v1"

    def push(self, *responses: Scripted) -> None:
        async def push() -> None:
            self.server.push(*responses)

        self._call(push())

    def requests(self) -> int:
        async def count() -> int:
            return len(self.server.received)

        return self._call(count())

    def stop(self) -> None:
        """Close the port (and release any stalled response)."""
        if not self.stopped:
            self.stopped = True
            self._call(self.server.stop())

    def close(self) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=HUNG)
        self._loop.close()


@contextmanager
def openai_wire() -> Iterator[ThreadedWire]:
    wire = ThreadedWire()
    wire.start()
    try:
        yield wire
    finally:
        wire.close()
