"""A blocking face over any async stream-checkpoint store, for scripts and the CLI.

There is no second implementation: every call runs the async store's own
coroutine on one private event loop (an :class:`asyncio.Runner`) that lives as
long as the wrapper, so loop-bound resources such as an aiobotocore client are
created once and reused across calls.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Generic, TypeVar

from awaken_s3.models import StoredCheckpoint, StreamCheckpoint
from awaken_s3.stores.base import StreamCheckpointStore

_T = TypeVar("_T")
_S = TypeVar("_S", bound=StreamCheckpointStore)


class SyncStreamCheckpointStore(Generic[_S]):
    """Blocking ``get``/``put``/``delete`` over an async store.

    Must not be called from inside a running event loop (async code should
    use the async store directly); doing so raises ``RuntimeError``. Calls
    from several threads are serialized. :meth:`close` closes the wrapped
    store (if it has a ``close``) and then the private loop.
    """

    def __init__(self, store: _S) -> None:
        self.store = store
        self._runner = asyncio.Runner()
        self._lock = threading.Lock()
        self._closed = False

    def get(self, run_id: str) -> StoredCheckpoint | None:
        return self._call(self.store.get(run_id))

    def put(self, checkpoint: StreamCheckpoint, *, expected_version: str | None) -> str:
        return self._call(self.store.put(checkpoint, expected_version=expected_version))

    def delete(self, run_id: str, *, expected_version: str | None = None) -> None:
        self._call(self.store.delete(run_id, expected_version=expected_version))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                close = getattr(self.store, "close", None)
                if close is not None:
                    result = close()
                    if inspect.isawaitable(result):
                        self._runner.run(_await(result))
            finally:
                self._runner.close()

    def __enter__(self) -> SyncStreamCheckpointStore[_S]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if loop_running():
            coro.close()
            raise RuntimeError(
                "the synchronous checkpoint store cannot run inside an event loop; "
                "await the async store instead"
            )
        with self._lock:
            if self._closed:
                coro.close()
                raise RuntimeError("synchronous checkpoint store is closed")
            return self._runner.run(coro)


def loop_running() -> bool:
    """A coroutine cannot be run to completion from here: this thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _await(awaitable: Any) -> Any:
    return await awaitable
