"""The provider tests' wire server (tests/providers/wire/) on an event loop of its own thread,
for synchronous tests: ``awaken-s3 dev --provider openai`` streams from it with the real SDK.

:func:`openai_wire` yields it ready; ``stop()`` closes its port, after which every connection
to it is refused (a provider that went away). :func:`push_interrupted_turn` scripts a turn
that only the test moves on: it stalls mid-answer until the worker is killed, and the
resumed worker's continuation waits at a gate until the test opens it (``proceed()``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tests.dev.conftest import DevServer
from tests.providers.wire.dialects import OpenAIDialect
from tests.providers.wire.server import STALL, WAIT, Scripted, WireServer

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

    def proceed(self) -> None:
        """Let a response held at ``WAIT`` go on."""
        self._loop.call_soon_threadsafe(self.server.proceed)

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


#: the turn :func:`push_interrupted_turn` scripts: streamed before the kill, after the resume
#: (before and after the gate), and as committed
BEFORE_KILL = "Hello from the wire."
RESUMED = " It goes"
AFTER_GATE = " on."
WHOLE_TURN = "Hello from the wire. It goes on."


def push_interrupted_turn(wire: ThreadedWire) -> None:
    d = wire.dialect
    wire.push(
        d.stream(d.start(), d.text(["Hello ", "from the wire."]), [STALL]),
        d.stream(d.start(), d.text([RESUMED]), [WAIT], d.text([AFTER_GATE]), d.end("end_turn")),
    )


def start_dev_on(factory: Callable[..., DevServer], wire: ThreadedWire) -> DevServer:
    """``awaken-s3 dev --provider openai`` streaming from ``wire``."""
    return factory(
        "--provider",
        "openai",
        "--lease-seconds",
        "4",
        "--sweep-interval",
        "0",
        env={
            "AWAKEN_OPENAI_BASE_URL": wire.base_url,
            "AWAKEN_MODEL": "gpt-4.1",
            # Only the test's kill ends the stall: no idle timeout gets there first.
            "AWAKEN_PROVIDER_IDLE_TIMEOUT": "600",
        },
    )
