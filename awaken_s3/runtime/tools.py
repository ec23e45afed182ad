"""Tools: typed Python functions the model may call, run at most once per call.

A tool is a plain function (sync or async) under :func:`tool`: its input schema comes from its
type hints, defaults and docstring (:mod:`awaken_s3.runtime.tool_schema`), a parameter typed
:class:`~awaken_s3.runtime.tool_context.ToolContext` receives the call's context, and it stays
callable as the function it was. An explicit JSON schema still wins where one is given
(``@tool(input_schema=...)`` or ``Tool(name, description, schema, func)``): the input is then
validated with ``jsonschema`` (Draft 2020-12, the dialect of current tool-use APIs).

A violation, an unknown tool or an exception raised by the tool becomes an ``is_error`` result
for the model, never a crashed run. Results are committed to the thread, which the API shows
to the caller, so an exception becomes the generic :func:`tool_failed` text and its details go
to the log only; a tool that wants the model (and the caller) to read its message raises
:class:`ToolError`. A return value may be a string (sent as is), a pydantic model or any
JSON-able data (sent as JSON). A value JSON cannot hold (an object of no JSON type, text with a
lone surrogate, which no UTF-8 encoding has) becomes the :func:`unserialisable` error result:
never the object's ``repr``, which may hold a secret; the log names its type only.

A run executes only the tools it enabled (``RunSettings.tools``): a call naming any other tool,
whether the model made it up or it came from a synthesised (R2) turn built from a checkpoint,
is refused with an error result, before any claim, and logged (:data:`REFUSED_LOG`).

A call is (run, turn, call id): providers may repeat ids from turn to turn (OpenAI-compatible
servers that send none get ``call_<index>``), so the turn is part of its identity, of its
ledger key and of its ToolContext's idempotency key. It is claimed in the thread store before
the callable runs and its result recorded after, so a redelivered or resumed run never repeats
a side effect: a finished call is answered from its record, which holds the tool's name and a
digest of the input, and a record made for another call is a loud error (the run fails with
``tool_call_mismatch``), never an answer. A call found claimed without a result (its worker
died between claim and result, or its attempt ran out of time) is re-run only when the tool is
declared ``idempotent``, otherwise it gets :data:`OUTCOME_UNKNOWN` as an error result.

A running call is bounded by the time the invocation has left (its deadline, which already
keeps the margin the worker needs to hand the run over) and by the tool's own ``timeout``, the
shorter of the two. A call that runs out is recorded as timed out: a non-idempotent tool gets
:data:`OUTCOME_TIMED_OUT`; an idempotent one is tried again by the next invocation, at most
:data:`MAX_TIMEOUTS` times in all, after which the run fails with ``tool_timed_out``.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import time
import typing
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Generic, ParamSpec, TypeVar, overload

from awaken_s3.errors import AwakenError
from awaken_s3.failures import FailureCode
from awaken_s3.messages import ToolResultBlock, ToolUseBlock
from awaken_s3.runtime.tool_context import ToolContext, idempotency_key, tool_logger
from awaken_s3.runtime.tool_schema import (
    FunctionSignature,
    ToolDefinitionError,
    function_signature,
    validate_arguments,
)
from awaken_s3.streaming.outcome import ClassifiedError
from awaken_s3.streaming.provider import ToolSpec
from awaken_s3.threads.base import ToolCallLedger
from awaken_s3.threads.errors import ToolCallMismatch
from awaken_s3.threads.models import ToolCallRecord, ToolCallStatus

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

log = logging.getLogger("awaken_s3.tools")

P = ParamSpec("P")
R = TypeVar("R")

OUTCOME_UNKNOWN: Final = (
    "The outcome of this tool call is unknown: it was started but its worker stopped before "
    "recording a result, and the tool is not safe to run twice. Check its effect before "
    "calling it again."
)
OUTCOME_TIMED_OUT: Final = (
    "The outcome of this tool call is unknown: it ran out of time before it finished, and the "
    "tool is not safe to run twice. Check its effect before calling it again."
)
#: attempts of an idempotent call that may run out of time before its run fails
MAX_TIMEOUTS: Final = 3
#: a tool result is stored in one DynamoDB item and sent to the model; longer output is cut
DEFAULT_MAX_RESULT_CHARS: Final = 60_000
#: the log line of a refused call; template.yaml counts it as the ToolCallsRefused metric
REFUSED_LOG: Final = "tool call refused: not enabled for the run"
#: what tool names may look like (every provider's rule: Anthropic, OpenAI and Bedrock agree)
TOOL_NAME_PATTERN: Final = r"^[A-Za-z0-9_-]{1,64}$"


class ToolError(AwakenError):
    """Raised by a tool to report a failure in words meant for the model.

    Its message becomes the error result committed to the thread as is, so it must hold
    nothing the caller may not read. Any other exception is reported as :func:`tool_failed`.
    """


class ToolCallTimedOut(AwakenError):
    """An idempotent call ran out of time: it has no result yet, its record says it timed out,
    and the next invocation tries it again (the run is handed over)."""


class ToolRunFailed(AwakenError):
    """A tool call the run cannot get past (a record made for another call, or time-outs on
    every attempt): the run fails with :attr:`error`, whose code is a FailureCode."""

    def __init__(self, error: ClassifiedError) -> None:
        super().__init__(error.message)
        self.error = error


def not_enabled(name: str) -> str:
    return f"tool {name!r} is not enabled for this run"


def tool_failed(name: str) -> str:
    return f"tool {name!r} failed with an internal error"


def unserialisable(name: str) -> str:
    return f"tool {name!r} returned a result that could not be serialised"


def refusal(name: str, enabled: Collection[str]) -> str | None:
    """The error result for a call the run may not make, or None when it may (pure)."""
    return None if name in enabled else not_enabled(name)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    content: str
    is_error: bool = False
    #: the call was cut at its time bound (``content`` says so, for a caller without a ledger)
    timed_out: bool = False


def input_digest(arguments: Mapping[str, Any]) -> str:
    """A call's input as one stable value: the digest of its canonical JSON (keys sorted,
    ASCII, so a lone surrogate is escaped rather than unencodable) (pure)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:32]


def _context_param(func: Callable[..., Any]) -> str | None:
    """The parameter of an explicit-schema tool that takes the ToolContext, if any."""
    try:
        hints = typing.get_type_hints(func)
    except Exception:
        return None
    return next((name for name, hint in hints.items() if hint is ToolContext), None)


@dataclass(frozen=True)
class Tool(Generic[P, R]):
    """A tool: a name, what the model reads about it, its input schema, the function.

    Build one with :func:`tool`, or directly with an explicit JSON schema. Calling a Tool
    calls its function, so a decorated function keeps working as a plain function.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    #: called with the validated input as keyword arguments; sync callables run in a thread
    func: Callable[P, R]
    #: safe to run again when a previous attempt's outcome is unknown
    idempotent: bool = False
    #: seconds; an async tool is cancelled after this, a sync one is abandoned (its thread
    #: finishes on its own). The invocation's deadline bounds every call, with or without it
    timeout: float | None = None
    #: runs with no other call of its turn at the same time
    exclusive: bool = False
    #: the validator derived from the function's signature (:func:`tool` without a schema);
    #: None validates against ``input_schema``
    signature: FunctionSignature | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        import re

        if not re.match(TOOL_NAME_PATTERN, self.name):
            raise ToolDefinitionError(
                f"tool name {self.name!r}: use 1-64 letters, digits, '_' or '-' "
                "(what every provider accepts)"
            )
        if self.timeout is not None and self.timeout <= 0:
            raise ToolDefinitionError(f"tool {self.name}: timeout must be positive")
        if self.signature is not None:
            return
        # Imported here: a worker whose tools all come from signatures never loads jsonschema.
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(dict(self.input_schema))
        except SchemaError as exc:
            raise ValueError(f"tool {self.name}: invalid input schema: {exc.message}") from exc

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    @property
    def context_param(self) -> str | None:
        if self.signature is not None:
            return self.signature.context_param
        return _context_param(self.func)

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)


@overload
def tool(func: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    idempotent: bool = False,
    timeout: float | None = None,
    exclusive: bool = False,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    idempotent: bool = False,
    timeout: float | None = None,
    exclusive: bool = False,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Make a function a tool: ``@tool`` or ``@tool(idempotent=True, timeout=10)``.

    ``name`` defaults to the function's, ``description`` to its docstring, ``input_schema`` to
    the schema of its parameters. ``idempotent``: safe to run again when a worker died with
    the call's outcome unknown (otherwise the model is told the outcome is unknown).
    ``timeout``: seconds a call may take (the invocation's deadline cuts it sooner when that
    comes first). ``exclusive``: the call runs alone, with no other call of its turn at the
    same time.
    """

    def build(target: Callable[P, R]) -> Tool[P, R]:
        if isinstance(target, Tool):
            raise ToolDefinitionError(f"{target.name} is already a tool")
        if not callable(target):
            raise ToolDefinitionError(f"@tool needs a function, not {type(target).__name__}")
        tool_name: str = name or str(getattr(target, "__name__", ""))
        signature = None if input_schema is not None else function_signature(target, name=tool_name)
        schema = input_schema if input_schema is not None else signature.input_schema  # type: ignore[union-attr]
        text = description
        if text is None:
            text = signature.description if signature is not None else inspect.getdoc(target)
        return Tool(
            tool_name,
            text or "",
            schema,
            target,
            idempotent=idempotent,
            timeout=timeout,
            exclusive=exclusive,
            signature=signature,
        )

    if func is not None:
        return build(func)
    return build


def as_tool(value: Tool[..., Any] | Callable[..., Any]) -> Tool[..., Any]:
    """A tool as given, or a plain function made one with :func:`tool`'s defaults."""
    return value if isinstance(value, Tool) else tool(value)


def render_result(result: Any) -> str:
    """The text the model gets for a tool's return value (pure). Raises what JSON cannot
    hold: never a ``str()`` fallback, which would commit an object's repr to the thread."""
    if isinstance(result, str):
        text = result
    else:
        from pydantic import BaseModel
        from pydantic_core import to_jsonable_python

        if isinstance(result, BaseModel):
            text = result.model_dump_json()
        else:
            text = json.dumps(to_jsonable_python(result))
    # Stored in DynamoDB and sent to the model as UTF-8: a lone surrogate has no encoding.
    text.encode("utf-8")
    return text


Sleep = Callable[[float], Awaitable[None]]


async def _bounded(work: Awaitable[R], seconds: float | None, sleep: Sleep) -> R:
    """``work``'s result, or TimeoutError once ``sleep(seconds)`` returns first (the clock
    is injectable, so tests drive it with events). The work is cancelled, not awaited: a
    sync tool's thread cannot be stopped and finishes on its own."""
    task = asyncio.ensure_future(work)
    if seconds is None:
        return await task
    timer = asyncio.ensure_future(sleep(max(0.0, seconds)))
    try:
        await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        raise TimeoutError
    finally:
        timer.cancel()
        if not task.done():
            task.cancel()
            # Retrieved so asyncio never warns about it; the attempt's fate is the ledger's.
            task.add_done_callback(lambda t: t.cancelled() or t.exception())


class ToolRegistry:
    def __init__(
        self,
        tools: Iterable[Tool[..., Any] | Callable[..., Any]] = (),
        *,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        timeout: float | None = None,
    ) -> None:
        """``timeout``: seconds any call of these tools may take (an agent's bound; a tool's
        own ``timeout`` and the invocation's deadline cut a call sooner when they come first).
        """
        if timeout is not None and not timeout > 0:
            raise ToolDefinitionError("a tool timeout must be positive")
        self._tools: dict[str, Tool[..., Any]] = {}
        self._validators: dict[str, Validator] = {}
        self.max_result_chars = max_result_chars
        self.timeout = timeout
        for item in tools:
            self.add(as_tool(item))

    def add(self, tool: Tool[..., Any]) -> Tool[..., Any]:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name} is already registered")
        if tool.signature is None:
            from jsonschema import Draft202012Validator

            self._validators[tool.name] = Draft202012Validator(dict(tool.input_schema))
        self._tools[tool.name] = tool
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
        """Decorator form of :meth:`add`, with an explicit schema."""

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

    def get(self, name: str) -> Tool[..., Any] | None:
        return self._tools.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def __iter__(self) -> typing.Iterator[Tool[..., Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self, names: Sequence[str] | None = None) -> list[ToolSpec]:
        """Specs of ``names`` (every tool when None); unknown names are an error."""
        chosen = list(self._tools) if names is None else list(names)
        missing = [n for n in chosen if n not in self._tools]
        if missing:
            raise KeyError(f"unknown tools: {', '.join(missing)}")
        return [self._tools[n].spec() for n in chosen]

    def prepare(self, name: str, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The keyword arguments to call the tool with, or a problem for the model."""
        tool = self._tools.get(name)
        if tool is None:
            return {}, f"unknown tool {name!r}"
        if tool.signature is not None:
            kwargs, problem = validate_arguments(tool.signature, name, arguments)
            return kwargs or {}, problem
        validator = self._validators[name]
        errors = sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))
        if not errors:
            return dict(arguments), None
        details = "; ".join(
            f"{'/'.join(str(p) for p in e.path) or '(input)'}: {e.message}" for e in errors
        )
        return {}, f"invalid input for tool {name!r}: {details}"

    def validate(self, name: str, arguments: Mapping[str, Any]) -> str | None:
        """None when valid, else a message for the model naming every violation."""
        return self.prepare(name, arguments)[1]

    async def invoke(
        self,
        call: ToolUseBlock,
        context: ToolContext | None = None,
        *,
        seconds: float | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> ToolOutput:
        """Validate and run the callable; every failure becomes an error result. The call is
        cut after the tool's ``timeout`` or ``seconds`` (the time its invocation has left),
        whichever is shorter; ``sleep`` is the clock that measures it."""
        kwargs, problem = self.prepare(call.name, call.input)
        if problem is not None:
            return ToolOutput(problem, is_error=True)
        tool = self._tools[call.name]
        if tool.context_param is not None:
            if context is None:
                raise ValueError(f"tool {call.name} takes a ToolContext: pass one")
            kwargs[tool.context_param] = context
        limits = (tool.timeout, self.timeout, seconds)
        bound = min((b for b in limits if b is not None), default=None)
        try:
            result = await _bounded(_call(tool, kwargs), bound, sleep)
        except TimeoutError:
            return ToolOutput(f"tool {call.name!r} timed out after {bound:g}s", True, True)
        except ToolError as exc:
            return self._checked(call, ToolOutput(f"tool {call.name!r} failed: {exc}", True))
        except Exception:
            # The text may hold internals (paths, hosts, credentials in a URL): log only.
            log.warning("tool %s (%s) raised", call.name, call.id, exc_info=True)
            return ToolOutput(tool_failed(call.name), True)
        try:
            return ToolOutput(self._cut(render_result(result)))
        except Exception as exc:
            # Never the value (nor the error's text, which may quote it): its type only.
            log.warning(
                "tool %s (%s) returned a result that could not be serialised: %s (%s)",
                call.name,
                call.id,
                type(result).__name__,
                type(exc).__name__,
            )
            return ToolOutput(unserialisable(call.name), True)

    def _checked(self, call: ToolUseBlock, output: ToolOutput) -> ToolOutput:
        """``output``, or the unserialisable error when its text has no UTF-8 encoding."""
        try:
            output.content.encode("utf-8")
        except UnicodeEncodeError:
            log.warning(
                "tool %s (%s) returned a result that could not be serialised: an error text",
                call.name,
                call.id,
            )
            return ToolOutput(unserialisable(call.name), True)
        return output

    def _cut(self, text: str) -> str:
        if len(text) > self.max_result_chars:
            cut = len(text) - self.max_result_chars
            text = f"{text[: self.max_result_chars]}\n[... {cut} more characters cut]"
        return text


async def _call(tool: Tool[..., Any], kwargs: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(tool.func):
        return await tool.func(**kwargs)
    result = await asyncio.to_thread(tool.func, **kwargs)
    if inspect.isawaitable(result):  # a callable object with an async __call__
        result = await result
    return result


@dataclass(frozen=True, slots=True)
class CallSite:
    """What a tool's context says about where the call comes from (the run's side)."""

    #: the run and thread as their caller named them
    run_id: str
    thread_id: str
    caller: str = ""
    #: a ``monotonic`` instant when the invocation must hand the run over (it already keeps
    #: the worker's margin): no call runs past it
    deadline: float | None = None
    monotonic: Callable[[], float] = time.monotonic
    #: the timer that cuts a call at its bound (tests drive it with events)
    sleep: Sleep = asyncio.sleep

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - self.monotonic()


@dataclass(frozen=True, slots=True)
class CallKey:
    """Which call this is: the stored run id, the run's turn counter, the call's id."""

    run_id: str
    turn: int
    call: ToolUseBlock


def tool_context(
    site: CallSite, *, stored_run_id: str, call: ToolUseBlock, attempt: int, record: ToolCallRecord
) -> ToolContext:
    """The context of ``call``; its idempotency key follows the call's record: (run, turn,
    call), or the legacy (run, call) of a call whose first attempt was started under it."""
    turn = record.turn if record.turn is not None else 0
    return ToolContext(
        run_id=site.run_id,
        thread_id=site.thread_id,
        tool_call_id=call.id,
        idempotency_key=idempotency_key(
            stored_run_id, call.id, None if record.legacy_key else record.turn
        ),
        attempt=attempt,
        caller=site.caller,
        logger=tool_logger(
            call.name, run_id=site.run_id, thread_id=site.thread_id, tool_call_id=call.id
        ),
        deadline=site.deadline,
        monotonic=site.monotonic,
        turn=turn,
    )


def _failed(code: FailureCode, message: str) -> ToolRunFailed:
    return ToolRunFailed(ClassifiedError(code, message, retryable=False))


def _timed_out_too_often(key: CallKey, record: ToolCallRecord) -> ToolRunFailed:
    log.error(
        "tool call %s (%s) at turn %d ran out of time %d times: the run fails",
        key.call.id,
        key.call.name,
        key.turn,
        record.timeouts,
    )
    return _failed(
        FailureCode.TOOL_TIMED_OUT,
        f"tool {key.call.name!r} (call {key.call.id}, turn {key.turn}) ran out of time "
        f"{record.timeouts} times",
    )


async def _unknown_outcome(
    store: ToolCallLedger, tool: Tool[..., Any], key: CallKey, epoch: int, record: ToolCallRecord
) -> ToolCallRecord | ToolResultBlock:
    """A call started before without a result (its worker died, its attempt ran out of time,
    or it was taken over from a legacy record): re-run an idempotent tool, within the bound
    of time-outs; answer any other with "outcome unknown"."""
    call = key.call
    if tool.idempotent and record.timeouts >= MAX_TIMEOUTS:
        raise _timed_out_too_often(key, record)
    if record.epoch != epoch or record.status == ToolCallStatus.TIMED_OUT:
        record = await store.reclaim_tool_call(
            key.run_id, call.id, turn=key.turn, epoch=epoch, previous_epoch=record.epoch
        )
    if not tool.idempotent:
        log.warning("tool call %s (%s): outcome unknown, not re-run", call.id, call.name)
        await store.finish_tool_call(
            key.run_id, call.id, turn=key.turn, epoch=epoch, content=OUTCOME_UNKNOWN, is_error=True
        )
        return ToolResultBlock(tool_use_id=call.id, content=OUTCOME_UNKNOWN, is_error=True)
    log.info("tool call %s (%s): outcome unknown, re-running (idempotent)", call.id, call.name)
    return record


async def _claim_call(
    store: ToolCallLedger, tool: Tool[..., Any], key: CallKey, *, epoch: int
) -> ToolCallRecord | ToolResultBlock:
    """Claim ``key``'s call for ``epoch``: the record to run it under, or the result it already
    has (its finished one, or "outcome unknown" for a non-idempotent tool started before)."""
    call = key.call
    try:
        record, fresh = await store.claim_tool_call(
            key.run_id,
            call.id,
            turn=key.turn,
            name=call.name,
            input_digest=input_digest(call.input),
            epoch=epoch,
        )
    except ToolCallMismatch as exc:
        log.error("tool call %s (%s): %s", call.id, call.name, exc)
        raise _failed(FailureCode.TOOL_CALL_MISMATCH, str(exc)) from exc
    if fresh:
        return record
    if record.status == ToolCallStatus.FINISHED:
        return ToolResultBlock(
            tool_use_id=call.id, content=record.content or "", is_error=record.is_error
        )
    if record.status == ToolCallStatus.CLAIMED and record.epoch == epoch and not record.adopted:
        # Claimed by this very lease epoch: our own claim, whose response was lost and
        # retried. An epoch is one invocation, which has not run this call yet.
        return record
    return await _unknown_outcome(store, tool, key, epoch, record)


async def _record_time_out(
    store: ToolCallLedger, tool: Tool[..., Any], key: CallKey, epoch: int
) -> ToolResultBlock:
    """The call ran out of time: a non-idempotent tool's result says its outcome is unknown;
    an idempotent one is recorded as timed out and left to the next invocation (or, past the
    bound, fails the run)."""
    call = key.call
    if not tool.idempotent:
        log.warning("tool call %s (%s): ran out of time, outcome unknown", call.id, call.name)
        done = await store.finish_tool_call(
            key.run_id,
            call.id,
            turn=key.turn,
            epoch=epoch,
            content=OUTCOME_TIMED_OUT,
            is_error=True,
            timed_out=True,
        )
        return ToolResultBlock(tool_use_id=call.id, content=done.content or "", is_error=True)
    record = await store.time_out_tool_call(key.run_id, call.id, turn=key.turn, epoch=epoch)
    if record.timeouts >= MAX_TIMEOUTS:
        raise _timed_out_too_often(key, record)
    log.warning(
        "tool call %s (%s): ran out of time (%d of %d), tried again by the next invocation",
        call.id,
        call.name,
        record.timeouts,
        MAX_TIMEOUTS,
    )
    raise ToolCallTimedOut(f"tool call {call.id} ({call.name}) ran out of time")


async def execute_tool_call(
    store: ToolCallLedger,
    registry: ToolRegistry,
    *,
    run_id: str,
    turn: int,
    epoch: int,
    call: ToolUseBlock,
    enabled: Collection[str],
    site: CallSite | None = None,
) -> ToolResultBlock:
    """Run one call at most once (idempotent tools: at least once, never lost).

    The call is ``(run_id, turn, call.id)``: ``turn`` is the run's turn counter when its calls
    run (the model turns committed so far), since providers may repeat ids across turns.
    ``enabled`` is the run's own tool list: any other name is refused before the claim.
    ``site`` fills the ToolContext of a tool that takes one (the run's ids when absent) and
    bounds the call by its deadline. Raises LeaseLost when ``epoch`` no longer holds the run
    (before anything ran), ToolCallConflict when a newer epoch took the call over while it
    ran, ToolCallTimedOut when an idempotent call ran out of time (it has no result yet), and
    ToolRunFailed when the run must fail (a record of another call, or too many time-outs).
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

    key = CallKey(run_id, turn, call)
    record = await _claim_call(store, tool, key, epoch=epoch)
    if isinstance(record, ToolResultBlock):
        return record

    where = site or CallSite(run_id=run_id, thread_id="")
    context = None
    if tool.context_param is not None:
        context = tool_context(
            where, stored_run_id=run_id, call=call, attempt=record.attempts, record=record
        )
    output = await registry.invoke(call, context, seconds=where.seconds_left(), sleep=where.sleep)
    if output.timed_out:
        return await _record_time_out(store, tool, key, epoch)
    done = await store.finish_tool_call(
        run_id, call.id, turn=turn, epoch=epoch, content=output.content, is_error=output.is_error
    )
    return ToolResultBlock(tool_use_id=call.id, content=done.content or "", is_error=done.is_error)
