"""What a tool learns about the call it serves: :class:`ToolContext`.

A tool function declares a parameter annotated ``ToolContext`` (any name) to receive one; the
parameter is not part of the input schema the model sees. The context says which run and
call this is, who asked, how many times the call has been started, and how long the
invocation has before it must hand the run over.

``idempotency_key`` is what to hand to an API that deduplicates requests (an email or a payment
provider's ``Idempotency-Key``): the same for every attempt of one call, whichever worker makes
it, and different for every other call. With it an idempotent tool that is re-run after a crash
(its outcome unknown) cannot do its effect twice at the far end either.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

TOOL_LOGGER = "awaken_s3.tools"


def idempotency_key(run_id: str, tool_call_id: str, turn: int | None) -> str:
    """Stable per (stored run id, turn, tool call id): the ledger's own identity of the call,
    so two calls never share one, even where a provider repeats ids from turn to turn (pure).

    ``turn`` None is the formula before the turn was part of a call's identity: a call whose
    first attempt was started under it keeps it for every later attempt."""
    name = f"{run_id}\0{tool_call_id}" if turn is None else f"{run_id}\0{turn}\0{tool_call_id}"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"awaken-{digest[:40]}"


class _RunLogger(logging.LoggerAdapter[logging.Logger]):
    """Adds the run's and the call's ids to every record a tool logs (Powertools' JSON
    formatter turns ``extra`` into fields)."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        extra = dict(self.extra or {})
        extra.update(kwargs.get("extra") or {})
        kwargs["extra"] = extra
        return msg, kwargs


def tool_logger(tool: str, **ids: str) -> logging.LoggerAdapter[logging.Logger]:
    return _RunLogger(logging.getLogger(f"{TOOL_LOGGER}.{tool}"), {"tool": tool, **ids})


@dataclass(frozen=True, slots=True)
class ToolContext:
    #: the run and thread as their caller named them (the ids the HTTP API takes)
    run_id: str
    thread_id: str
    #: the model's id of this call (unique within its turn only: some providers repeat ids)
    tool_call_id: str
    #: the same on every attempt of this call, different for every other call
    idempotency_key: str
    #: 1 for the first start of this call; more when an idempotent tool is re-run after a
    #: worker died with the call's outcome unknown
    attempt: int
    #: the identity that started the run (the token's subject); "" when there is none
    caller: str
    #: a logger that adds the run, the call and the tool to every record
    logger: logging.LoggerAdapter[logging.Logger]
    #: a ``monotonic`` instant: when this invocation must hand the run over (None: no deadline)
    deadline: float | None = None
    monotonic: Callable[[], float] = field(default=time.monotonic, repr=False)
    #: the run's turn counter when the call runs: with ``tool_call_id``, what names the call
    turn: int = 0

    @property
    def seconds_left(self) -> float | None:
        """Seconds before the invocation must hand the run over; None without a deadline. A
        tool that cannot finish in time should fail cleanly rather than be cut off."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self.monotonic())
