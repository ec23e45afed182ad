"""The functions ``awaken-s3 dev`` runs in its own process: the HTTP API, the WebSocket API's
handler and the sweeper, one invocation at a time, as one Lambda container would.

One thread runs them all (:attr:`LocalFunctions.executor`): Powertools' resolver keeps the
current event on the class, so two requests at once in one process would see each other's,
and the process's event loop and clients (``awaken_s3.service.wiring``) are used by one
thread at a time anyway. The dev server's own loop awaits each invocation there, so it keeps
serving sockets (and the management API the socket handler posts to) meanwhile.
"""

from __future__ import annotations

import asyncio
import importlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from awaken_s3.local.lambda_context import LocalLambdaContext, in_process_context

API_TIMEOUT: Final = 29
SOCKET_TIMEOUT: Final = 29
SWEEPER_TIMEOUT: Final = 60
SCHEDULED_EVENT: Final = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


class LocalFunctions:
    def __init__(self, name: str, region: str, app: Any) -> None:
        self.name = name
        self.region = region
        #: the app the API serves (``--reload`` replaces it between invocations)
        self.app = app
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lambda")
        self.sweeps = 0
        # The very code the Lambda entry points name (handlers/ only re-exports them).
        self._api = importlib.import_module("awaken_s3.service.http")
        self._sweeper = importlib.import_module("awaken_s3.service.sweeper_job")

    def context(self, function: str, timeout: float) -> LocalLambdaContext:
        name = f"{self.name}-{function}"
        return in_process_context(name, region=self.region, timeout=timeout, log_stream_name="dev")

    def _call(self, function: str, event: Any) -> Any:
        if function == "api":
            handler = self._api.handler_for(self.app)
            return handler(event, self.context("api", API_TIMEOUT))
        if function == "socket":
            socket = importlib.import_module("awaken_s3.service.socket")
            return socket.lambda_handler(event, self.context("socket", SOCKET_TIMEOUT))
        result = self._sweeper.lambda_handler(event, self.context("sweeper", SWEEPER_TIMEOUT))
        self.sweeps += 1
        return result

    async def invoke(self, function: str, event: Any) -> Any:
        """Invoke ``function`` (``api``, ``socket`` or ``sweeper``) with ``event``, awaited
        from the dev server's loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self._call, function, event)

    async def sweep(self) -> Any:
        return await self.invoke("sweeper", dict(SCHEDULED_EVENT))

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
