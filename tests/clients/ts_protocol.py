"""The TypeScript client's protocol types, written from the Python definitions themselves.

``clients/typescript/src/protocol.generated.ts`` is this module's output: the WebSocket frames
(built here by the very builders the server sends them with, so their field names are the
server's), the socket messages, the HTTP routes, the request bodies (from the pydantic models'
JSON schema) and the response views (from the view functions, applied to sample records). A
field the server adds, renames or drops changes the output, and
``tests/clients/test_ts_protocol.py`` fails until the file is written again::

    .venv/bin/python -m tests.clients.ts_protocol > clients/typescript/src/protocol.generated.ts

Every field needs a TypeScript type below (:data:`FIELD_TYPES`): a new field with no type stops
the generator instead of becoming ``unknown``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, get_args

from pydantic import BaseModel

from awaken_s3.failures import FailureCode
from awaken_s3.messages import Message, TextBlock, ToolUseBlock
from awaken_s3.service import frames
from awaken_s3.service.http_models import (
    CreateRunRequest,
    CreateThreadRequest,
    run_view,
    thread_view,
)
from awaken_s3.service.routes import HTTP_ROUTES, SOCKET_TOKEN_PARAMETER
from awaken_s3.streaming.recovery import PlanKind
from awaken_s3.threads.models import RunSettings, RunState, RunStatus, Thread

ROOT: Final = Path(__file__).resolve().parents[2]
GENERATED: Final = ROOT / "clients" / "typescript" / "src" / "protocol.generated.ts"
SOCKET_SOURCE: Final = ROOT / "awaken_s3" / "service" / "socket.py"

#: the TypeScript type of each field a frame or a view carries, by name
FIELD_TYPES: Final[Mapping[str, str]] = {
    "run_id": "string",
    "thread_id": "string",
    "turn": "number",
    "offset": "number",
    "text": "string",
    "index": "number",
    "id": "string",
    "name": "string",
    "input_length": "number",
    "input_json": "string",
    "plan": "Plan",
    "retry_count": "number",
    "text_length": "number",
    "tool_calls": "number",
    "status": "RunStatus",
    "error": "PublicError | null",
    "code": "string",
    "message": "string",
    "of": '"text" | "tool_call"',
    "message_count": "number",
    "created_at": "number",
    "updated_at": "number",
    "metadata": "Record<string, string>",
    "latest_run": "string | null",
    "model": "string",
    "usage": "Usage",
    "stop_reason": "string | null",
}
#: a frame's own field types where the name alone does not say it
FRAME_FIELD_TYPES: Final[Mapping[tuple[str, str], str]] = {
    ("error", "run_id"): "string | null",
    ("error", "code"): "SocketErrorCode",
}
#: fields a frame carries only sometimes
OPTIONAL_FRAME_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "skipped": frozenset({"index", "offset"}),
}

_CALL = ToolUseBlock(id="call_0", name="lookup", input={"q": "x"})
_MESSAGE = Message(role="assistant", content=(TextBlock(text="hi"),))


def sample_frames() -> list[frames.Frame]:
    """One frame of each kind the builders make (a skipped frame of each piece kind)."""
    text = frames.text_frame("r1", 0, 0, "hi")
    call = frames.tool_call_frame("r1", 0, 0, _CALL, 0, "{}", 2)
    return [
        text,
        call,
        frames.resumed_frame("r1", 0, "R1", 1),
        frames.turn_committed_frame("r1", 0, _MESSAGE),
        frames.run_ended_frame("r1", "failed", {"code": "c", "message": "m"}),
        frames.error_frame("not_found", "r1"),
        frames.skipped_frame(text),
        frames.skipped_frame(call),
    ]


def inline_frames(source: str = "") -> dict[str, list[str]]:
    """The frames the socket handler writes as dict literals (``following``, ``cancel``): their
    keys, read from its source, so a key changed there changes the output too."""
    tree = ast.parse(source or SOCKET_SOURCE.read_text())
    out: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        if len(keys) != len(node.keys) or "type" not in keys:
            continue
        kind = node.values[keys.index("type")]
        if isinstance(kind, ast.Constant) and isinstance(kind.value, str):
            out[kind.value] = [str(key) for key in keys]
    return out


def frame_fields() -> dict[str, list[str]]:
    """Each frame type's fields, in the order the server writes them."""
    kinds: dict[str, list[str]] = {}
    for frame in sample_frames():
        fields = kinds.setdefault(str(frame["type"]), [])
        fields.extend(name for name in frame if name not in fields)
    for kind, keys in inline_frames().items():
        kinds.setdefault(kind, keys)
    return kinds


def _type_of(kind: str, name: str) -> str:
    if name == "type":
        return f'"{kind}"'
    known = FRAME_FIELD_TYPES.get((kind, name)) or FIELD_TYPES.get(name)
    if known is None:
        raise KeyError(f"no TypeScript type for field {name!r} of {kind!r}: add it to FIELD_TYPES")
    return known


def _pascal(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("_"))


def frame_interfaces() -> list[str]:
    lines: list[str] = []
    names: list[str] = []
    for kind, fields in frame_fields().items():
        name = f"{_pascal(kind)}Frame"
        names.append(name)
        optional = OPTIONAL_FRAME_FIELDS.get(kind, frozenset())
        lines.append(f"export interface {name} {{")
        for field in fields:
            mark = "?" if field in optional else ""
            lines.append(f"  {field}{mark}: {_type_of(kind, field)};")
        lines.append("}")
    lines.append("/** Every frame the WebSocket API sends. */")
    lines.append("export type ServerFrame =\n  | " + "\n  | ".join(names) + ";")
    return lines


def _schema_type(schema: Mapping[str, Any]) -> str:
    """A TypeScript type for the simple JSON schemas the request bodies use."""
    if "anyOf" in schema:
        return " | ".join(_schema_type(option) for option in schema["anyOf"])
    kind = schema.get("type")
    simple = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean"}
    if kind in simple:
        return simple[kind]
    if kind == "null":
        return "null"
    if kind == "array":
        return f"{_schema_type(schema.get('items', {}))}[]"
    if kind == "object":
        return f"Record<string, {_schema_type(schema.get('additionalProperties', {}))}>"
    raise KeyError(f"no TypeScript type for the JSON schema {schema!r}")


def request_interface(model: type[BaseModel]) -> list[str]:
    schema = model.model_json_schema()
    required = set(schema.get("required", ()))
    lines = [f"export interface {model.__name__} {{"]
    for name, field in schema["properties"].items():
        mark = "" if name in required else "?"
        lines.append(f"  {name}{mark}: {_schema_type(field)};")
    lines.append("}")
    return lines


def _sample_run() -> RunState:
    return RunState(run_id="o-r1", thread_id="o-t1", owner="o", settings=RunSettings(model="m"))


def view_interface(name: str, view: Mapping[str, Any], extra: Sequence[str] = ()) -> list[str]:
    lines = [f"export interface {name} {{"]
    lines.extend(f"  {field}: {_type_of(name, field)};" for field in view)
    lines.extend(extra)
    lines.append("}")
    return lines


def _union(values: Sequence[str]) -> str:
    return " | ".join(f'"{value}"' for value in values)


def render() -> str:
    from awaken_s3.service.scoping import owner_tag

    owner = "o"
    thread = Thread(thread_id=f"{owner_tag(owner)}-t1", owner=owner)
    run = _sample_run().with_(
        run_id=f"{owner_tag(owner)}-r1", thread_id=f"{owner_tag(owner)}-t1", owner=owner
    )
    routes = ",\n".join(
        f'  {route.name}: {{ method: "{route.method}", path: "{route.path}" }}'
        for route in HTTP_ROUTES
    )
    parts = [
        "// Written by tests/clients/ts_protocol.py from the server's Python definitions.",
        "// Do not edit: tests/clients/test_ts_protocol.py fails when this file drifts.",
        "",
        f"export type RunStatus = {_union([s.value for s in RunStatus])};",
        f"export const TERMINAL_STATUSES: readonly RunStatus[] = ["
        f"{', '.join(repr(s.value).replace(chr(39), chr(34)) for s in RunStatus if s.terminal)}"
        "];",
        f"export type Plan = {_union(list(get_args(PlanKind)))};",
        f"export type SocketErrorCode = {_union(list(frames.ERROR_MESSAGES))};",
        "/** The failure codes a failed run's `error.code` may hold. */",
        f"export type FailureCode = {_union([c.value for c in FailureCode])};",
        "/** A failed run's error as a caller sees it: a code and a fixed sentence. */",
        "export interface PublicError {\n  code: string;\n  message: string;\n}",
        "",
        *frame_interfaces(),
        "",
        "/** Messages a client sends on the WebSocket API. */",
        'export interface FollowMessage {\n  action: "follow";\n  run_id: string;\n'
        "  turn?: number;\n  after?: number;\n}",
        'export interface CancelMessage {\n  action: "cancel";\n  run_id: string;\n}',
        f'export const SOCKET_TOKEN_PARAMETER = "{SOCKET_TOKEN_PARAMETER}";',
        "",
        "/** The HTTP API's routes. */",
        f"export const HTTP_ROUTES = {{\n{routes},\n}} as const;",
        "",
        *request_interface(CreateThreadRequest),
        *request_interface(CreateRunRequest),
        "export interface Usage {",
        *(f"  {name}: number;" for name in run_view(run)["usage"]),
        "}",
        *view_interface("ThreadView", thread_view(thread)),
        *view_interface(
            "RunView",
            run_view(run),
            ["  partial?: unknown;", "  partial_unavailable?: boolean;"],
        ),
    ]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
