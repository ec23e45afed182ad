"""The dev stack's workers: the real worker handler in killable local containers, fed by the
local SQS event source (``awaken_s3.local.event_source``) on a thread of its own, and what the
console shows of them (each run's invocations, the containers driving it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from awaken_s3.dev.timeline import Timelines
from awaken_s3.local.containers import FunctionConfig
from awaken_s3.local.event_source import (
    BusyWorker,
    EventSourceThread,
    InvocationResult,
    SqsEventSource,
)
from awaken_s3.service.queue import run_id_of


def drives(busy: BusyWorker, run_id: str) -> bool:
    return any(run_id_of(record.body) == run_id for record in busy.records)


class Workers:
    def __init__(
        self,
        function: FunctionConfig,
        *,
        queue_url: str,
        endpoint_url: str | None,
        region: str,
        concurrency: int,
        log_dir: Path,
        timelines: Timelines,
    ) -> None:
        self.timelines = timelines
        self._source = SqsEventSource(
            queue_url,
            function,
            endpoint_url=endpoint_url,
            region=region,
            max_concurrency=concurrency,
            on_invocation=self._on_invocation,
            log_dir=log_dir,
            stop_grace=2,
        )
        self._thread: EventSourceThread | None = EventSourceThread(self._source)

    def start(self) -> None:
        assert self._thread is not None
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop(grace=2)
            self._thread = None

    def driving(self, run_id: str) -> list[dict[str, Any]]:
        """The containers driving ``run_id`` now."""
        return [
            {"pid": busy.pid, "started_at": busy.started_at, "log_stream": busy.log_stream_name}
            for busy in self._source.busy()
            if drives(busy, run_id)
        ]

    def kill(self, run_id: str) -> list[int]:
        """SIGKILL the containers driving ``run_id`` (through the event source, by PID)."""
        pids: list[int] = self._source.kill_busy(lambda busy: drives(busy, run_id))
        return pids

    def recycle(self) -> list[int]:
        """Kill every container: the next invocations start fresh ones (new code)."""
        pids: list[int] = self._source.recycle()
        return pids

    def _on_invocation(self, result: InvocationResult) -> None:
        for record in result.records:
            run_id = run_id_of(record.body)
            if run_id is not None:
                self.timelines.invoked(
                    run_id,
                    {
                        "pid": result.pid,
                        "outcome": result.outcome,
                        "started_at": result.started_at,
                        "duration": round(result.duration, 3),
                        "cold_start": result.cold_start,
                        "log_stream": result.log_stream_name,
                    },
                )
