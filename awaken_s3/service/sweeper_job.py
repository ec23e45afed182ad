"""The scheduled sweeper's Lambda wiring: re-sends runs that nobody drives, and deletes the
checkpoints that outlived their runs.

The rules are :mod:`awaken_s3.service.sweeper` and :func:`awaken_s3.maintenance.clean_leftovers`;
``handlers/sweeper.py`` is the entry point.

Invoked by an EventBridge schedule (template.yaml), one invocation at a time (reserved
concurrency 1, so two sweeps never overlap). The event's content is not used. A schedule
fires at most once a minute, and a run whose message the queue lost waits for the sweeper's
next pass, so one invocation makes ``AWAKEN_SWEEP_PASSES`` rescue passes
``AWAKEN_SWEEP_PASS_EVERY_SECONDS`` apart (the template: 4, 15 s apart, finishing well within
the minute; idle between passes costs little at 256 MB), and cleans leftover checkpoints once,
after its first pass. It stops early when the function's time runs short.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from awaken_s3.service.logs import route_library_logs
from awaken_s3.service.wiring import warm_runtime

if TYPE_CHECKING:
    from awaken_s3.maintenance import Cleaned
    from awaken_s3.service.config import SweeperSettings
    from awaken_s3.service.queue import RunMessage
    from awaken_s3.service.sweeper import SweepReport
    from awaken_s3.settings import StorageSettings

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "awaken-s3")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "awaken-s3")
route_library_logs(logger)


async def run_sweep(storage: StorageSettings, settings: SweeperSettings) -> SweepReport:
    """One sweep over the process's clients; on :func:`warm_runtime`'s loop."""
    from awaken_s3.service.queue import send_run_message
    from awaken_s3.service.sweeper import sweep

    services = await warm_runtime().services(storage)

    async def send(message: RunMessage, epoch: int, rescues: int) -> object:
        return await send_run_message(
            services.sqs, services.queue_url, message, epoch=epoch, turn=rescues
        )

    return await sweep(
        services.threads,
        send,
        now=time.time(),
        max_rescues=settings.max_rescues,
        grace=storage.sweep_grace,
        batch=settings.batch,
    )


async def run_leftover_clean(storage: StorageSettings, settings: SweeperSettings) -> list[Cleaned]:
    """Delete the checkpoints of ended runs that nobody deleted (see
    :func:`awaken_s3.maintenance.clean_leftovers`); quiet for one sweep grace first."""
    from datetime import UTC, datetime, timedelta

    from awaken_s3.maintenance import clean_leftovers

    services = await warm_runtime().services(storage)
    return await clean_leftovers(
        services.checkpoints,
        services.threads,
        now=datetime.now(UTC),
        quiet_for=timedelta(seconds=storage.sweep_grace),
        limit=settings.leftover_batch,
    )


def _count(name: str, value: int) -> None:
    if value:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


#: how the invocation waits between passes (one name, so a test can make the wait an event)
sleep: Callable[[float], None] = time.sleep
#: the least time left before the function's timeout in which another pass is started; the
#: reserve is twice the slowest pass so far, at least this
MIN_PASS_RESERVE = 0.5
#: the summary's counts, summed over the passes
_SUMMED = ("examined", "rescued", "rescued_repeatedly", "abandoned", "skipped", "send_failures")


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(raise_on_empty_metrics=False)
def _handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # Imported here, not with the handler: the settings load pydantic-settings, which the
    # handler's cold import need not pay for (docs/PERFORMANCE.md, "Cold start").
    from awaken_s3.service.config import SweeperSettings
    from awaken_s3.settings import StorageSettings

    storage, settings = StorageSettings.from_env(need_queue=True), SweeperSettings.from_env()
    started = time.monotonic()
    summary: dict[str, Any] = dict.fromkeys(_SUMMED, 0)
    rescued_runs: list[str] = []
    passes = 0
    slowest = 0.0
    for number in range(settings.passes):
        if number:
            wait = max(0.0, started + number * settings.pass_every - time.monotonic())
            reserve = max(MIN_PASS_RESERVE, 2 * slowest)
            if context.get_remaining_time_in_millis() / 1000 - wait < reserve:
                break
            sleep(wait)
        began = time.monotonic()
        report = warm_runtime().run(run_sweep(storage, settings))
        passes += 1
        _count("RunsRescued", report.rescued)
        _count("RunsRescuedRepeatedly", report.rescued_repeatedly)
        _count("RunsAbandoned", report.abandoned)
        _count("RescueSendFailures", report.send_failures)
        for name in _SUMMED:
            summary[name] += getattr(report, name)
        rescued_runs.extend(report.rescued_runs)
        if number == 0:
            # After the first rescues: a run abandoned just now has its checkpoint deleted an
            # invocation later, once its object has been quiet for a grace.
            leftovers = _clean_leftovers(storage, settings)
            deleted = sum(1 for cleaned in leftovers if cleaned.action == "deleted")
            _count("LeftoverCheckpointsDeleted", deleted)
            summary["leftovers_deleted"] = deleted
        slowest = max(slowest, time.monotonic() - began)
    summary["passes"] = passes
    logger.info("sweep done", extra={**summary, "rescued_runs": rescued_runs[:20]})
    return summary


def _clean_leftovers(storage: StorageSettings, settings: SweeperSettings) -> list[Cleaned]:
    from awaken_s3.errors import StreamCheckpointError
    from awaken_s3.threads.errors import ThreadStoreError

    try:
        cleaned = warm_runtime().run(run_leftover_clean(storage, settings))
    except (StreamCheckpointError, ThreadStoreError) as exc:
        # The rescues above are what keeps runs alive; a failed clean-up is retried next minute.
        logger.warning("leftover checkpoint clean-up failed", extra={"error": str(exc)})
        _count("LeftoverCleanFailures", 1)
        return []
    for item in cleaned:
        if item.action == "deleted":
            logger.info(
                "deleted a checkpoint that outlived its run",
                extra={"run_id": item.verdict.run_id, "reason": item.verdict.stale},
            )
    return cleaned


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with warnings.catch_warnings():
        # A sweep that found nothing to do is the normal case.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        return cast(dict[str, Any], _handle(event, context))
