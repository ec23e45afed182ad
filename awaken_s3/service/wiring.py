"""AWS clients for the handlers: one event loop and one set of clients for the process.

Lambda runs one invocation at a time in a container and keeps the container's memory from
one invocation to the next. So the handlers keep, for the life of the process, one event loop
(an :class:`asyncio.Runner`) and the DynamoDB, S3 and SQS clients (and the configured
provider with its Bedrock client), opened on first use inside that loop: aiobotocore clients
are bound to the loop that opened them, and they are only ever used on it
(:class:`WarmRuntime`, :func:`warm_runtime`). A warm invocation then spends microseconds on
its setup instead of opening three clients, each of which re-reads the CA bundle on its first
request.

What could go wrong with clients that outlive an invocation, and what is done about it:

* Lambda freezes the process between invocations, and the peer may close a pooled
  connection meanwhile. aiobotocore never reuses a connection idle for longer than its
  keep-alive timeout (12 s); one that died sooner fails its request with a connection error,
  which botocore's retries send again on a new connection (connection errors are retried in
  every retry mode). A stale connection costs a retry, never the invocation.
* A failure that may leave a client unusable (no answer came back: a connection, timeout or
  client-state error anywhere in the exception's causes, see :func:`poisons`) marks the
  clients poisoned; the next use closes them all and opens new ones.
* A process that changes its AWS environment (tests, ``awaken-s3 dev``: another endpoint,
  region or credentials) gets new clients; the stores are rebuilt per invocation anyway,
  since they only name the bucket, table and queue.
* Several threads may call the handlers of one process (``awaken-s3 dev`` serves requests
  from a thread pool): the runner is used by one thread at a time.
* Botocore hooks registered on :func:`shared_session` apply to clients opened after the
  registration: register them at import time (or :meth:`WarmRuntime.reset`).

:func:`open_services` opens a set of clients for one ``async with`` block, for code that
owns its own loop (the CLI, tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import aioboto3

    from awaken_s3.providers.config import ProviderSettings
    from awaken_s3.settings import StorageSettings
    from awaken_s3.stores.s3 import S3StreamCheckpointStore
    from awaken_s3.streaming.provider import Provider
    from awaken_s3.threads.dynamo import DynamoThreadStore

T = TypeVar("T")

#: what botocore reads from the environment when it opens a client: a change means new clients
CLIENT_ENVIRONMENT = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI",
    "AWAKEN_CONNECTIONS_TABLE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
)


@dataclass(frozen=True)
class Services:
    settings: StorageSettings
    threads: DynamoThreadStore
    checkpoints: S3StreamCheckpointStore
    #: an aiobotocore SQS client (continuations and run starts)
    sqs: Any
    #: the S3 and DynamoDB clients behind the stores (to name their endpoints in errors)
    s3: Any = None
    dynamodb: Any = None
    #: the WebSocket API's management client (live pushes), None without a WebSocket API
    management: Any = None

    @property
    def queue_url(self) -> str:
        if self.settings.queue_url is None:
            raise RuntimeError("AWAKEN_QUEUE_URL is not set")
        return self.settings.queue_url


@functools.cache
def shared_session() -> aioboto3.Session:
    """The process's session: loaded service models and resolved credentials, nothing bound
    to an event loop. Lambda's credentials are static environment variables, so no
    refreshable-credential lock is ever shared between loops."""
    import aioboto3

    return aioboto3.Session()


def build_services(
    settings: StorageSettings, *, dynamodb: Any, s3: Any, sqs: Any, management: Any = None
) -> Services:
    """The stores over open clients (cheap: they only name the table, bucket and queue)."""
    from awaken_s3.stores.s3 import S3StreamCheckpointStore
    from awaken_s3.threads.dynamo import DynamoThreadStore

    return Services(
        settings=settings,
        threads=DynamoThreadStore(
            settings.table,
            client=dynamodb,
            s3_client=s3,
            bucket=settings.bucket,
            sweep_grace=settings.sweep_grace,
        ),
        checkpoints=S3StreamCheckpointStore(
            settings.bucket, prefix=settings.checkpoint_prefix, client=s3
        ),
        sqs=sqs,
        s3=s3,
        dynamodb=dynamodb,
        management=management,
    )


@asynccontextmanager
async def open_services(
    settings: StorageSettings, *, session: aioboto3.Session | None = None
) -> AsyncIterator[Services]:
    """Clients for one ``async with`` block on the caller's loop (the CLI, tests)."""
    async with AsyncExitStack() as stack:
        db, s3, sqs, management = await _enter_clients(stack, session or shared_session())
        yield build_services(settings, dynamodb=db, s3=s3, sqs=sqs, management=management)


async def _enter_clients(
    stack: AsyncExitStack, session: aioboto3.Session
) -> tuple[Any, Any, Any, Any]:
    """DynamoDB (with the thread store's retry settings), S3 and SQS clients, and the
    WebSocket API's management client where there is one, closed with ``stack``."""
    from awaken_s3.service.connections import connections_table
    from awaken_s3.threads.dynamo import dynamodb_client_config

    db = await stack.enter_async_context(
        session.client("dynamodb", config=dynamodb_client_config())
    )
    s3 = await stack.enter_async_context(session.client("s3"))
    sqs = await stack.enter_async_context(session.client("sqs"))
    management = None
    if connections_table() is not None:
        # Its endpoint is the socket API's own, from botocore's settings
        # (AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI): the service has no regional default.
        management = await stack.enter_async_context(session.client("apigatewaymanagementapi"))
    return db, s3, sqs, management


def poisons(exc: BaseException) -> bool:
    """Whether a failure may have left the clients unusable (pure).

    True when no answer came back: a botocore error (connection, timeout, credentials), an
    aiohttp or socket error, or a client used after its session or loop closed (a
    ``RuntimeError``), anywhere in the exception's causes. An answer (``ClientError``) or a
    decision of the code (any other exception) leaves the clients as they were.
    """
    from aiohttp import ClientError as HttpClientError
    from botocore.exceptions import BotoCoreError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, BotoCoreError | HttpClientError | OSError):
            return True
        if isinstance(current, RuntimeError) and not isinstance(
            current, NotImplementedError | RecursionError
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


def client_environment(env: Mapping[str, str] | None = None) -> tuple[str | None, ...]:
    env = os.environ if env is None else env
    return tuple(env.get(name) for name in CLIENT_ENVIRONMENT)


@dataclass
class _ProviderEntry:
    """One provider built from settings, what closes it (and its Bedrock client), and when
    it was built (a keyed provider is rebuilt once its key may have rotated)."""

    provider: Provider
    settings: ProviderSettings
    built_at: float
    stack: AsyncExitStack


def provider_key(settings: ProviderSettings) -> str:
    """Settings that build the same provider share it: a provider serves any model id (each
    request names its model), so the model is not part of the key."""
    return settings.model_copy(update={"model": ""}).model_dump_json()


@dataclass
class _Clients:
    stack: AsyncExitStack
    environment: tuple[str | None, ...]
    dynamodb: Any
    s3: Any
    sqs: Any
    management: Any
    #: the providers built from settings (one per provider configuration the app's agents use)
    providers: dict[str, _ProviderEntry] = field(default_factory=dict)

    async def close_provider(self, key: str | None = None) -> None:
        """Close one provider (``key``), or all of them."""
        keys = list(self.providers) if key is None else [key]
        for each in keys:
            entry = self.providers.pop(each, None)
            if entry is not None:
                await entry.stack.aclose()


class WarmRuntime:
    """One event loop and one set of clients, opened on first use and kept until an error
    poisons them (see the module's docstring)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        # Reentrant: a nested run() from the same thread fails in asyncio (a loop is
        # running) with a clear error instead of deadlocking here.
        self._lock = threading.RLock()
        self._runner: asyncio.Runner | None = None
        self._clients: _Clients | None = None
        self._poisoned = False
        #: how many times the clients were opened since the process started (or the last
        #: :meth:`reset`): 1 for a container that never failed
        self.opened = 0

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the process's loop (any thread; one at a time)."""
        with self._lock:
            if self._runner is None or self._runner.get_loop().is_closed():
                self._runner = asyncio.Runner()
                self._clients = None  # bound to the loop that is gone
            try:
                return self._runner.run(coro)
            except BaseException as exc:
                if poisons(exc):
                    self._poisoned = True
                raise
            finally:
                self._cancel_leftovers()

    def _cancel_leftovers(self) -> None:
        # What a per-invocation runner's close did: a task the coroutine left behind (a
        # checkpoint put that outlasted every wait) must not wake up in a later invocation.
        assert self._runner is not None
        loop = self._runner.get_loop()
        leftovers = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in leftovers:
            task.cancel()
        if leftovers:
            loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))

    async def services(self, settings: StorageSettings) -> Services:
        """The stores over the process's clients (opened now if needed); on the runner."""
        clients = await self._open()
        return build_services(
            settings,
            dynamodb=clients.dynamodb,
            s3=clients.s3,
            sqs=clients.sqs,
            management=clients.management,
        )

    async def provider(self, settings: ProviderSettings) -> Provider:
        """The provider ``settings`` describe, built once and kept with the clients, one per
        provider configuration (the model aside: see :func:`provider_key`). A keyed provider
        is rebuilt once its key may have rotated: after ``api_key_max_age`` seconds, as often
        as the key cache itself refreshes."""
        from awaken_s3.providers.config import build_provider

        clients = await self._open()
        key = provider_key(settings)
        current = clients.providers.get(key)
        keyed = settings.provider != "bedrock"
        if current is not None and not (
            keyed and self._clock() - current.built_at > settings.api_key_max_age
        ):
            return current.provider
        await clients.close_provider(key)
        stack = AsyncExitStack()
        bedrock: Any = None
        if settings.provider == "bedrock":
            from awaken_s3.providers.bedrock import client_config

            bedrock = await stack.enter_async_context(
                shared_session().client(
                    "bedrock-runtime",
                    region_name=settings.region,
                    config=client_config(
                        idle_timeout=settings.idle_timeout,
                        connect_timeout=10.0,
                        fresh_connections=True,
                    ),
                )
            )
        provider = build_provider(settings, bedrock_client=bedrock)
        stack.push_async_callback(close_provider, provider)
        clients.providers[key] = _ProviderEntry(provider, settings, self._clock(), stack)
        return provider

    async def _open(self) -> _Clients:
        environment = client_environment()
        if self._clients is not None and (
            self._poisoned or self._clients.environment != environment
        ):
            await self._close()
        if self._clients is None:
            stack = AsyncExitStack()
            try:
                db, s3, sqs, management = await _enter_clients(stack, shared_session())
            except BaseException:
                await stack.aclose()
                raise
            clients = _Clients(stack, environment, db, s3, sqs, management)
            stack.push_async_callback(clients.close_provider)
            self._clients = clients
            self._poisoned = False
            self.opened += 1
        return self._clients

    async def _close(self) -> None:
        clients, self._clients = self._clients, None
        if clients is not None:
            with contextlib.suppress(Exception):  # a poisoned client may fail to close
                await clients.stack.aclose()

    def reset(self) -> None:
        """Close the clients and the loop; the next use opens new ones."""
        with self._lock:
            self.opened = 0
            runner, self._runner = self._runner, None
            if runner is None:
                self._clients = None
                return
            try:
                if not runner.get_loop().is_closed():
                    runner.run(self._close())
            finally:
                self._clients = None
                runner.close()

    def forget(self) -> None:
        """Drop everything without closing it (a forked child must not touch the parent's
        loop or sockets)."""
        self._lock = threading.RLock()
        self._runner = None
        self._clients = None


async def close_provider(provider: Provider) -> None:
    """Close a provider that holds resources (an SDK client); one without ``aclose`` has none."""
    aclose = getattr(provider, "aclose", None)
    if aclose is not None:
        await aclose()


_RUNTIME = WarmRuntime()
os.register_at_fork(after_in_child=_RUNTIME.forget)


def warm_runtime() -> WarmRuntime:
    """The process's runtime, shared by the worker, the API and the sweeper."""
    return _RUNTIME
