"""The SQS worker: each record names a run; drive it until it ends or the deadline nears.

``make_handler(app=, provider_factory=)`` builds a Lambda handler for an app's agents
(:meth:`awaken_s3.App.worker_handler` calls it); ``handlers/worker.py`` is this repository's
entry point, serving the default app (:func:`awaken_s3.agents.default_app`). Each run names
its agent: the loop takes that agent's tools, and its turns stream from that agent's provider
(the environment's unless the agent names its own; ``provider_factory`` replaces them all).

One event loop and one set of clients for the life of the process
(:func:`awaken_s3.service.wiring.warm_runtime`: aiobotocore clients and provider SDK clients
are bound to the loop that opened them, so they are opened on that loop on first use and
kept). The Powertools batch processor calls a synchronous record handler, so each record's
coroutine runs on that one loop in turn. Importing this module loads only Powertools' logger
and metrics: the run loop, the stores and the AWS SDK load with the first invocation.

Per record: a malformed body is logged, counted and acknowledged (it can never succeed);
otherwise the run loop runs until ``deadline = now + remaining - margin``. As soon as the
handler starts, before any claim, it hides the batch's records for the lease period plus a
margin (:mod:`awaken_s3.service.visibility`); while the worker holds a run's lease it keeps
that run's record hidden so, extended with every renewal: a worker that dies without
answering (timeout, out of memory, a lost host) lets its record come back a little after its
lease ran out, so the run resumes within about one lease period, not after the queue's
visibility timeout.
What happens to the record then is :func:`awaken_s3.service.dispositions.disposition`: a
suspended run gets a continuation message (then the record is acknowledged); a record is
kept (failed, with a visibility that brings it back when it can help) whenever the run is
not ended, not handed over and not held by a live worker. An unexpected exception fails the
record (partial batch response).

On a FIFO queue the processor is :class:`SqsFifoPartialProcessor` with
``skip_group_on_error``: after a failed record, the later records of the *same run* (message
group) are failed too, so one run's messages stay in order, while other runs proceed.

Tracer is not used: it needs aws-xray-sdk, which is not a dependency of this package.
"""

from __future__ import annotations

import os
import time
import uuid
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from awaken_s3.errors import AwakenError
from awaken_s3.service.logs import route_library_logs

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch import BatchProcessor
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from awaken_s3.agents import Agent, App
    from awaken_s3.runtime.loop import RunEnd, RunLoop, RunResult
    from awaken_s3.runtime.tools import ToolRegistry
    from awaken_s3.service.config import WorkerSettings
    from awaken_s3.service.dispositions import Disposition
    from awaken_s3.service.instrumented import InstrumentedRunner, TurnTally
    from awaken_s3.service.push import RunPusher
    from awaken_s3.service.queue import RunMessage
    from awaken_s3.service.visibility import BatchVisibility
    from awaken_s3.service.wiring import Services, WarmRuntime
    from awaken_s3.streaming.provider import Provider

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "awaken-s3")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "awaken-s3")
route_library_logs(logger)

ProviderFactory = Callable[[], "Provider"]
LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


class RecordKept(AwakenError):
    """The record must come back later (see :func:`disposition`): it is reported failed."""


def worker_id(context: LambdaContext) -> str:
    """Unique per record: the container's log stream, the request id and a random suffix (a
    Lambda retry reuses the request id; the suffix keeps ids from ever repeating)."""
    stream = getattr(context, "log_stream_name", None) or "local"
    request = getattr(context, "aws_request_id", None) or "no-request"
    return f"{stream}/{request}/{uuid.uuid4().hex[:12]}"[-256:]


#: The clock the deadline, the runner and the run loop share. One name, so a test can move
#: all three together and a deadline cut falls where its script puts it on any machine.
monotonic: Callable[[], float] = time.monotonic


def deadline_for(context: LambdaContext, margin: float) -> float:
    """A :data:`monotonic` instant, ``margin`` seconds before Lambda stops the function."""
    return monotonic() + context.get_remaining_time_in_millis() / 1000 - margin


def is_fifo_event(event: dict[str, Any], queue_url: str) -> bool:
    records = event.get("Records") or []
    if records and isinstance(records[0], dict) and records[0].get("eventSourceARN"):
        return str(records[0]["eventSourceARN"]).endswith(".fifo")
    from awaken_s3.service.queue import is_fifo

    return is_fifo(queue_url)


def _count(name: str, value: float = 1) -> None:
    if value:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def record_tally(tally: TurnTally) -> None:
    for plan, count in sorted(tally.plans.items()):
        _count(f"RecoveryPlan{plan}", count)
    _count("CheckpointPuts", tally.checkpoint_puts)
    _count("CheckpointFailures", tally.checkpoint_failures)
    _count("CheckpointFenced", tally.checkpoint_fenced)
    _count("CheckpointLoadFailures", tally.checkpoint_load_failures)
    _count("CheckpointRepaired", tally.checkpoint_repaired)
    _count("CheckpointNewerSchema", tally.checkpoint_newer_schema)


def record_result(result: RunResult) -> None:
    from awaken_s3.service.dispositions import RUN_END_METRICS

    _count(RUN_END_METRICS[result.end])
    _count("TurnsCommitted", result.turns_committed)
    _count("ToolCalls", result.tool_calls)
    _count("CheckpointLeftovers", int(result.checkpoint_left))
    if result.resume_delay is not None:
        metrics.add_metric(name="ResumeDelay", unit=MetricUnit.Seconds, value=result.resume_delay)


def log_run_end(result: RunResult, writer: str, tally: TurnTally) -> None:
    """One log line per run invocation: how it ended and what it did."""
    logger.info(
        "run invocation ended",
        extra={
            "run_id": result.run_id,
            "end": result.end.value,
            "turns_committed": result.turns_committed,
            "tool_calls": result.tool_calls,
            "worker_id": writer,
            # Plans the turns of this invocation were resumed with (fresh turns: none).
            "plans": sorted(tally.plans.elements()),
            "resume_delay": result.resume_delay,
            "error_code": result.error.code if result.error else None,
            # The caller sees only the code; the provider's own words are for operators.
            "error_message": result.error.message if result.error else None,
        },
    )


#: the provider an agent's turns stream from (None: the invocation's default provider)
AgentProviders = Callable[["Agent"], Any]


class Invocation:
    """The state of one worker invocation: clients, the app, providers and the deadline."""

    def __init__(
        self,
        services: Services,
        provider: Provider,
        app: App,
        *,
        settings: WorkerSettings,
        context: LambdaContext,
        deadline: float,
        agent_provider: AgentProviders | None = None,
        visibility: BatchVisibility | None = None,
    ) -> None:
        self.services = services
        self.provider = provider
        self.app = app
        self.agent_provider = agent_provider
        self.settings = settings
        self.context = context
        self.deadline = deadline
        self.visibility = visibility

    async def handle(self, record: SQSRecord) -> str:
        if self.visibility is None:
            return await self._handle(record)
        self.visibility.started(record.message_id)
        async with self.visibility.kept_while():
            return await self._handle(record)

    async def _handle(self, record: SQSRecord) -> str:
        from pydantic import ValidationError

        from awaken_s3.service.queue import RunMessage

        try:
            message = RunMessage.model_validate_json(record.body)
        except ValidationError as exc:
            # It can never succeed: retrying would only feed the dead-letter queue slowly.
            logger.warning(
                "acknowledging a malformed queue message",
                extra={"message_id": record.message_id, "errors": exc.error_count()},
            )
            _count("MalformedMessages")
            return "malformed"
        logger.set_correlation_id(message.run_id)
        try:
            return await self._run(message, record)
        finally:
            logger.set_correlation_id(None)

    async def _run(self, message: RunMessage, record: SQSRecord) -> str:
        from awaken_s3.service.dispositions import Action, disposition
        from awaken_s3.service.push import pushing, run_pusher
        from awaken_s3.service.queue import set_visibility
        from awaken_s3.threads.errors import RunNotFound

        writer = worker_id(self.context)
        # Live pushes to the run's followers, where the stack has a WebSocket API.
        pusher = run_pusher(self.services, message.run_id)
        loop, runner = self._run_loop(writer, pusher)

        async def keep_hidden() -> None:
            # In step with the lease: hidden while this worker is alive, back soon after the
            # lease runs out if it dies without answering.
            await set_visibility(
                self.services.sqs,
                self.services.queue_url,
                record.receipt_handle,
                self.settings.visibility_timeout,
            )

        try:
            async with pushing(pusher):
                result = await loop.run(
                    message.run_id, deadline=self.deadline, heartbeat=keep_hidden
                )
                if pusher is not None:
                    pusher.run_returned(result)
        except RunNotFound:
            logger.warning(
                "acknowledging a message for an unknown run",
                extra={"message_id": record.message_id},
            )
            _count("UnknownRuns")
            return "unknown_run"
        finally:
            record_tally(runner.tally)
        record_result(result)
        log_run_end(result, writer, runner.tally)
        action = disposition(result, now=time.time(), lease_seconds=self.settings.lease_seconds)
        if action.action is Action.CONTINUE:
            await self._continue(result)
        elif action.action is Action.RETRY:
            await self._keep(record, action)
            raise RecordKept(f"run {result.run_id}: {action.reason}; back in {action.delay}s")
        return result.end.value

    def _run_loop(
        self, writer: str, pusher: RunPusher | None
    ) -> tuple[RunLoop, InstrumentedRunner]:
        """The run loop for one record, as ``writer``, and the runner under it (its tally feeds
        the metrics); with a ``pusher``, the turns and their text reach the run's followers."""
        from awaken_s3.runtime.loop import RunLoop
        from awaken_s3.service.instrumented import InstrumentedRunner
        from awaken_s3.streaming.retry import RetryPolicy
        from awaken_s3.streaming.runner import TurnRunner

        turns = TurnRunner(
            self.provider,
            self.services.checkpoints
            if pusher is None
            else pusher.store(self.services.checkpoints),
            writer_id=writer,
            retry_policy=RetryPolicy(max_interruptions=self.settings.max_interruptions),
            clock=monotonic,
            writer_factory=None if pusher is None else pusher.writer_factory,
        )
        runner = InstrumentedRunner(turns if pusher is None else pusher.runner(turns))
        loop = RunLoop(
            self.services.threads,
            runner,
            self.services.checkpoints,
            worker_id=writer,
            lease_seconds=self.settings.lease_seconds,
            max_idle_suspensions=self.settings.max_idle_suspensions,
            monotonic=monotonic,
            app=self.app,
            provider_for=self.agent_provider,
            turn_headroom=self.settings.turn_headroom,
            listener=pusher,
        )
        return loop, runner

    async def _keep(self, record: SQSRecord, action: Disposition) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        from awaken_s3.service.queue import set_visibility

        try:
            await set_visibility(
                self.services.sqs, self.services.queue_url, record.receipt_handle, action.delay
            )
        except (ClientError, BotoCoreError) as exc:
            # The record still comes back, only after the visibility it had.
            logger.warning(
                "could not set a kept record's visibility",
                extra={"message_id": record.message_id, "error": type(exc).__name__},
            )

    async def _continue(self, result: RunResult) -> None:
        from awaken_s3.service.queue import RunMessage, send_run_message

        run = result.run
        epoch = run.lease.epoch if run is not None else 0
        turn = run.turn if run is not None else 0
        await send_run_message(
            self.services.sqs,
            self.services.queue_url,
            RunMessage(run_id=result.run_id, reason="continue"),
            epoch=epoch,
            turn=turn,
        )
        _count("ContinuationsSent")


async def _open_provider(factory: ProviderFactory) -> Provider:
    # Inside the invocation's loop: SDK clients may bind to the loop they are created on.
    return factory()


def _batch_processor(event: dict[str, Any], queue_url: str) -> BatchProcessor:
    """The Powertools processor for ``event``'s queue: on a FIFO queue, a failed record fails
    the later records of its run (its message group) too."""
    from aws_lambda_powertools.utilities.batch import (
        BatchProcessor,
        EventType,
        SqsFifoPartialProcessor,
    )

    processor: BatchProcessor
    if is_fifo_event(event, queue_url):
        processor = SqsFifoPartialProcessor(skip_group_on_error=True)
    else:
        processor = BatchProcessor(EventType.SQS)
    # A batch whose every record is busy is a normal outcome, not a function error.
    processor.raise_on_entire_batch_failure = False
    return processor


def _invocation_providers(
    runtime: WarmRuntime, provider_factory: ProviderFactory | None
) -> tuple[Provider, AgentProviders | None]:
    """The invocation's provider and, without a factory, each agent's own (the factory's
    provider serves every agent)."""
    from awaken_s3.providers.config import ProviderSettings
    from awaken_s3.service.wiring import provider_key

    if provider_factory is not None:
        return runtime.run(_open_provider(provider_factory)), None
    environment = ProviderSettings.from_env()
    provider = runtime.run(runtime.provider(environment))

    # Planned once per agent and invocation (reading the settings costs milliseconds, and
    # the environment does not change within an invocation), not once per turn.
    planned: dict[str, ProviderSettings] = {}

    async def agent_provider(agent: Agent) -> Provider | None:
        from awaken_s3.agents import plan_run

        # The provider the API planned the agent's runs with; the agents that keep the
        # environment's share the invocation's.
        wanted = planned.get(agent.name)
        if wanted is None:
            wanted = planned[agent.name] = plan_run(agent).provider
        if provider_key(wanted) == provider_key(environment):
            return None
        return await runtime.provider(wanted)

    return provider, agent_provider


def process_batch(
    event: dict[str, Any],
    context: LambdaContext,
    app: App,
    provider_factory: ProviderFactory | None,
) -> dict[str, Any]:
    from aws_lambda_powertools.utilities.batch import process_partial_response

    from awaken_s3.service.config import WorkerSettings
    from awaken_s3.service.visibility import BatchVisibility, receipts_of
    from awaken_s3.service.wiring import close_provider, warm_runtime
    from awaken_s3.settings import StorageSettings

    storage = StorageSettings.from_env(need_queue=True)
    settings = WorkerSettings.from_env()
    deadline = deadline_for(context, settings.deadline_margin)
    processor = _batch_processor(event, storage.queue_url or "")

    runtime = warm_runtime()
    services = runtime.run(runtime.services(storage))
    # First, before any claim: a death from here on brings the records back within a lease.
    visibility = BatchVisibility(
        services.sqs,
        services.queue_url,
        receipts_of(event),
        seconds=settings.visibility_timeout,
        interval=settings.lease_seconds / 3,
    )
    runtime.run(visibility.take())
    own_provider = provider_factory is not None
    provider, agent_provider = _invocation_providers(runtime, provider_factory)
    try:
        invocation = Invocation(
            services,
            provider,
            app,
            settings=settings,
            context=context,
            deadline=deadline,
            agent_provider=agent_provider,
            visibility=visibility,
        )
        response = process_partial_response(
            event=event,
            record_handler=lambda record: runtime.run(invocation.handle(record)),
            processor=processor,
            context=context,
        )
        return dict(response)
    finally:
        if own_provider:
            runtime.run(close_provider(provider))


def make_handler(
    tools: ToolRegistry | None = None,
    provider_factory: ProviderFactory | None = None,
    *,
    app: App | str | None = None,
) -> LambdaHandler:
    """A worker ``lambda_handler`` for ``app``'s agents (and, in tests, your provider).

    ``app``: the :class:`~awaken_s3.App`, or ``"MODULE:ATTRIBUTE"`` naming it, imported at the
    first invocation (so the handler module's own import stays light). ``tools`` without an
    app: one default agent with those tools (the form before apps). Without
    ``provider_factory`` each agent's provider is the one its settings configure, built on
    first use and kept for the life of the process with the AWS clients; a factory runs once
    per invocation, on the process's loop, serves every agent, and a provider it returns with
    ``aclose()`` is closed when the invocation ends. The tools' variables in
    ``AWAKEN_TOOL_ENVIRONMENT`` are set in the environment here
    (:mod:`awaken_s3.service.tool_environment`).
    """
    if app is not None and tools is not None:
        raise ValueError("give the tools to the app's agents, not to make_handler")
    from awaken_s3.service.tool_environment import apply_tool_environment

    # Before the first run: the tools read their settings from the environment.
    apply_tool_environment()
    served: list[App] = []

    def resolve() -> App:
        if not served:
            from awaken_s3.agents import App, default_agent, load_app

            if isinstance(app, App):
                served.append(app)
            elif isinstance(app, str):
                served.append(load_app(app))
            else:
                served.append(App([default_agent(tools or ())]))
        return served[0]

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics(raise_on_empty_metrics=False)
    def handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return process_batch(event, context, resolve(), provider_factory)

    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        with warnings.catch_warnings():
            # An invocation that counted nothing is normal, not worth a warning.
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            return cast(dict[str, Any], handle(event, context))

    return lambda_handler


def __getattr__(name: str) -> Any:
    # RunEnd is part of this module's interface; the run loop behind it loads on first use.
    if name == "RunEnd":
        from awaken_s3.runtime.loop import RunEnd

        return RunEnd
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LambdaHandler", "ProviderFactory", "RecordKept", "RunEnd", "make_handler"]
