"""Tools: a registry of Python callables with JSON-schema inputs, run at most once per call.

Inputs are validated with ``jsonschema`` (Draft 2020-12, the dialect of current tool-use
APIs) before the callable runs; a violation, an unknown tool or an exception raised by the
tool becomes an ``is_error`` result for the model, never a crashed run.

A run executes only the tools it enabled (``RunSettings.tools``): a call naming any other tool,
whether the model made it up or it came from a synthesised (R2) turn built from a checkpoint,
is refused with an error result, before any claim, and logged (:data:`REFUSED_LOG`).

Results are committed to the thread, which the API shows to the caller. So an exception raised
by a tool becomes the generic :func:`tool_failed` text, and its details go to the log only;
a tool that wants the model (and the caller) to read its message raises :class:`ToolError`.

A call is claimed in the thread store before the callable runs and its result recorded
after, so a redelivered or resumed run never repeats a side effect: a finished call is
answered from its record; a call found claimed without a result (its worker died between
claim and result) is re-run only when the tool is declared ``idempotent``, otherwise it
gets :data:`OUTCOME_UNKNOWN` as an error result.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from awaken_s3.messages import ToolResultBlock, ToolUseBlock
from awaken_s3.streaming.provider import ToolSpec
from awaken_s3.threads.base import ToolCallLedger
from awaken_s3.threads.models import ToolCallStatus

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

log = logging.getLogger("awaken_s3.tools")

OUTCOME_UNKNOWN: Final = (
    "The outcome of this tool call is unknown: it was started but its worker stopped before "
    "recording a result, and the tool is not safe to run twice. Check its effect before "
    "calling it again."
)
#: a tool result is stored in one DynamoDB item and sent to the model; longer output is cut
DEFAULT_MAX_RESULT_CHARS: Final = 60_000
#: the log line of a refused call; template.yaml counts it as the ToolCallsRefused metric
REFUSED_LOG: Final = "tool call refused: not enabled for the run"


class ToolError(Exception):
    """Raised by a tool to report a failure in words meant for the model.

    Its message becomes the error result committed to the thread as is, so it must hold
    nothing the caller may not read. Any other exception is reported as :func:`tool_failed`.
    """


def not_enabled(name: str) -> str:
    return f"tool {name!r} is not enabled for this run"


def tool_failed(name: str) -> str:
    return f"tool {name!r} failed with an internal error"


def refusal(name: str, enabled: Collection[str]) -> str | None:
    """The error result for a call the run may not make, or None when it may (pure)."""
    return None if name in enabled else not_enabled(name)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: Mapping[str, Any]
    #: called with the validated input as keyword arguments; sync callables run in a thread
    func: Callable[..., Any]
    #: safe to run again when a previous attempt's outcome is unknown
    idempotent: bool = False
    #: seconds; an async tool is cancelled after this, a sync one is abandoned (its thread
    #: finishes on its own)
    timeout: float | None = None

    def __post_init__(self) -> None:
        # Imported here: a worker without tools never loads jsonschema.
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(dict(self.input_schema))
        except SchemaError as exc:
            raise ValueError(f"tool {self.name}: invalid input schema: {exc.message}") from exc

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)


class ToolRegistry:
    def __init__(
        self, tools: Iterable[Tool] = (), *, max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Validator] = {}
        self.max_result_chars = max_result_chars
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name} is already registered")
        from jsonschema import Draft202012Validator

        self._tools[tool.name] = tool
        self._validators[tool.name] = Draft202012Validator(dict(tool.input_schema))
        return tool

    def tool(
        self,
        *,
        name: str | None = None,
        description: str = "",
        input_schema: Mapping[str, Any],
        idempotent: bool = False,
        timeout: float | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of :meth:`add`."""

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self.add(
                Tool(
                    name or func.__name__,
                    description or (inspect.getdoc(func) or ""),
                    input_schema,
                    func,
                    idempotent=idempotent,
                    timeout=timeout,
                )
            )
            return func

        return register

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def specs(self, names: Sequence[str] | None = None) -> list[ToolSpec]:
        """Specs of ``names`` (every tool when None); unknown names are an error."""
        chosen = list(self._tools) if names is None else list(names)
        missing = [n for n in chosen if n not in self._tools]
        if missing:
            raise KeyError(f"unknown tools: {', '.join(missing)}")
        return [self._tools[n].spec() for n in chosen]

    def validate(self, name: str, arguments: Mapping[str, Any]) -> str | None:
        """None when valid, else a message for the model naming every violation."""
        validator = self._validators.get(name)
        if validator is None:
            return f"unknown tool {name!r}"
        errors = sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))
        if not errors:
            return None
        details = "; ".join(
            f"{'/'.join(str(p) for p in e.path) or '(input)'}: {e.message}" for e in errors
        )
        return f"invalid input for tool {name!r}: {details}"

    async def invoke(self, call: ToolUseBlock) -> ToolOutput:
        """Validate and run the callable; every failure becomes an error result."""
        problem = self.validate(call.name, call.input)
        if problem is not None:
            return ToolOutput(problem, is_error=True)
        tool = self._tools[call.name]
        try:
            async with asyncio.timeout(tool.timeout):
                if inspect.iscoroutinefunction(tool.func):
                    result = await tool.func(**call.input)
                else:
                    result = await asyncio.to_thread(tool.func, **call.input)
        except TimeoutError:
            return ToolOutput(f"tool {call.name!r} timed out after {tool.timeout}s", True)
        except ToolError as exc:
            return ToolOutput(f"tool {call.name!r} failed: {exc}", True)
        except Exception:
            # The text may hold internals (paths, hosts, credentials in a URL): log only.
            log.warning("tool %s (%s) raised", call.name, call.id, exc_info=True)
            return ToolOutput(tool_failed(call.name), True)
        return ToolOutput(self._render(result))

    def _render(self, result: Any) -> str:
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        if len(text) > self.max_result_chars:
            cut = len(text) - self.max_result_chars
            text = f"{text[: self.max_result_chars]}\n[... {cut} more characters cut]"
        return text


async def execute_tool_call(
    store: ToolCallLedger,
    registry: ToolRegistry,
    *,
    run_id: str,
    epoch: int,
    call: ToolUseBlock,
    enabled: Collection[str],
) -> ToolResultBlock:
    """Run one call at most once (idempotent tools: at least once, never lost).

    ``enabled`` is the run's own tool list: any other name is refused before the claim.
    Raises LeaseLost when ``epoch`` no longer holds the run (before anything ran), and
    ToolCallConflict when a newer epoch took the call over while it ran.
    """
    refused = refusal(call.name, enabled)
    if refused is not None:
        # Checked before the registry: a tool registered in this worker is still not the
        # run's to call. The answer is deterministic, so no record is needed.
        log.warning(
            REFUSED_LOG, extra={"run_id": run_id, "tool_use_id": call.id, "tool": call.name}
        )
        return ToolResultBlock(tool_use_id=call.id, content=refused, is_error=True)
    tool = registry.get(call.name)
    problem = registry.validate(call.name, call.input)
    if tool is None or problem is not None:
        # Nothing can run, so there is no side effect to guard: the answer is deterministic.
        return ToolResultBlock(tool_use_id=call.id, content=problem or "", is_error=True)

    record, fresh = await store.claim_tool_call(run_id, call.id, name=call.name, epoch=epoch)
    if not fresh and record.status == ToolCallStatus.CLAIMED and record.epoch == epoch:
        # Claimed by this very lease epoch: our own claim, whose response was lost and
        # retried. An epoch is one invocation, which has not run this call yet.
        fresh = True
    if not fresh:
        if record.status == ToolCallStatus.FINISHED:
            return ToolResultBlock(
                tool_use_id=call.id, content=record.content or "", is_error=record.is_error
            )
        await store.reclaim_tool_call(run_id, call.id, epoch=epoch, previous_epoch=record.epoch)
        if not tool.idempotent:
            log.warning("tool call %s (%s): outcome unknown, not re-run", call.id, call.name)
            await store.finish_tool_call(
                run_id, call.id, epoch=epoch, content=OUTCOME_UNKNOWN, is_error=True
            )
            return ToolResultBlock(tool_use_id=call.id, content=OUTCOME_UNKNOWN, is_error=True)
        log.info("tool call %s (%s): outcome unknown, re-running (idempotent)", call.id, call.name)

    output = await registry.invoke(call)
    done = await store.finish_tool_call(
        run_id, call.id, epoch=epoch, content=output.content, is_error=output.is_error
    )
    return ToolResultBlock(tool_use_id=call.id, content=done.content or "", is_error=done.is_error)
