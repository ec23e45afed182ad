"""One local Lambda container: ``python -m awaken_s3.local.lambda_host HANDLER``.

``HANDLER`` is ``package.module:function`` (or Lambda's own ``package.module.function``). The
init phase imports it once, so later invocations are warm. Then the container serves one
invocation at a time over its protocol pipe, a JSON line each way:

- in: ``{"headers": {aws_request_id, invoked_function_arn, deadline_ms}, "event": {...}}``
- out, once after init: ``{"type": "ready"}`` or ``{"type": "init_error", ...}``
- out, per invocation: ``{"type": "result", "response": ...}`` or ``{"type": "error", ...}``

The protocol runs on private copies of file descriptors 0 and 1; the handler's own stdout is
sent to stderr (Lambda sends both streams to the log), so a stray ``print`` or an EMF metrics
line can never corrupt a reply. An exception that is not an ``Exception`` (``SystemExit``)
ends the process, as it ends a Lambda runtime. The event source enforces the deadline by
killing this process; nothing here watches the clock.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import IO, Any

from awaken_s3.local.lambda_context import InvocationHeaders, LocalLambdaContext

Handler = Callable[[Any, LocalLambdaContext], Any]
_PR_SET_PDEATHSIG = 1


def split_handler(spec: str) -> tuple[str, str]:
    """``"pkg.mod:func"`` or ``"pkg.mod.func"`` -> ``("pkg.mod", "func")``."""
    module, sep, name = spec.partition(":") if ":" in spec else spec.rpartition(".")
    if not sep or not module or not name:
        raise ValueError(f"handler {spec!r} is not 'module:function' or 'module.function'")
    return module, name


def load_handler(spec: str) -> Handler:
    module_name, attribute = split_handler(spec)
    module = importlib.import_module(module_name)
    handler = getattr(module, attribute, None)
    if not callable(handler):
        raise AttributeError(f"module {module_name!r} has no callable {attribute!r}")
    return handler  # type: ignore[no-any-return]


def error_payload(kind: str, exc: BaseException, error_type: str | None = None) -> dict[str, Any]:
    """Lambda's error shape: errorType, errorMessage and the stack trace lines."""
    return {
        "type": kind,
        "errorType": error_type or type(exc).__name__,
        "errorMessage": str(exc),
        "stackTrace": traceback.format_tb(exc.__traceback__),
    }


def _claim_protocol_streams() -> tuple[IO[str], IO[str]]:
    """Keep fds 0 and 1 for the protocol; give the handler /dev/null and stderr instead."""
    protocol_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    protocol_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", encoding="utf-8", buffering=1, closefd=False)
    return protocol_in, protocol_out


def _die_with_parent(parent: int) -> None:
    """Linux only: be SIGKILLed when the event source's thread dies, even if it is itself
    SIGKILLed and never gets to stop its containers. Elsewhere this is a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


def _send(out: IO[str], payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload) + "\n")
    out.flush()


def _reply(handler: Handler, line: str) -> dict[str, Any]:
    request = json.loads(line)
    headers = InvocationHeaders.from_wire(request["headers"])
    context = LocalLambdaContext.for_invocation(headers)
    try:
        response = handler(request["event"], context)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return error_payload("error", exc)
    try:
        json.dumps(response)
    except (TypeError, ValueError) as exc:
        return error_payload("error", exc, "Runtime.MarshalError")
    return {"type": "result", "response": response}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m awaken_s3.local.lambda_host MODULE:FUNCTION", file=sys.stderr)
        return 2
    parent = int(os.environ.get("AWAKEN_LOCAL_PARENT_PID", "0")) or os.getppid()
    protocol_in, protocol_out = _claim_protocol_streams()
    _die_with_parent(parent)
    try:
        handler = load_handler(argv[1])
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        _send(protocol_out, error_payload("init_error", exc, "Runtime.ImportModuleError"))
        return 1
    _send(protocol_out, {"type": "ready"})
    for line in protocol_in:
        _send(protocol_out, _reply(handler, line))
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
