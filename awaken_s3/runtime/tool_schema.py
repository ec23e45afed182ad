"""A tool's input schema and validator, derived from a Python function's signature.

The parameters' type hints and defaults become a pydantic model (arguments may themselves be
pydantic models, dataclasses, enums, ``Literal``s, ``Annotated[..., Field(...)]``), the
docstring (Google, NumPy or reST style, read by ``docstring_parser``, the parser Strands uses
for the same job) gives the tool's description and each parameter's. The JSON schema the model
sees is the model's, without pydantic's generated titles. A parameter annotated
:class:`~awaken_s3.runtime.tool_context.ToolContext` is filled by the runtime and is not part
of the schema.

Validation is pydantic's, in its default (lax) mode: a model that sends ``"3"`` for an
``int`` gets 3, as a person reading the schema would expect; anything that does not fit is
a message naming every field at fault, which goes back to the model as the call's result.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from awaken_s3.errors import AwakenError
from awaken_s3.runtime.tool_context import ToolContext


class ToolDefinitionError(AwakenError, TypeError):
    """A function cannot be a tool as written (the message says which parameter and why)."""


@dataclass(frozen=True, slots=True)
class FunctionSignature:
    """What the runtime needs to call a function as a tool."""

    description: str
    input_schema: dict[str, Any]
    #: validates the model's input; its fields are the function's parameters
    arguments: type[BaseModel]
    #: the parameter that receives the ToolContext, if any
    context_param: str | None


def _docstring(func: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    import docstring_parser

    raw = inspect.getdoc(func) or ""
    if not raw:
        return "", {}
    parsed = docstring_parser.parse(raw)
    parts = [p for p in (parsed.short_description, parsed.long_description) if p]
    params = {p.arg_name: p.description for p in parsed.params if p.description}
    return "\n\n".join(parts), params


def _parameter_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' type hints, resolved; the return annotation is left out (only the
    inputs are described, and a return type defined in a local scope need not resolve)."""
    target = inspect.unwrap(func)
    annotations = {
        name: value
        for name, value in getattr(target, "__annotations__", {}).items()
        if name != "return"
    }
    shim = types.FunctionType((lambda: None).__code__, getattr(target, "__globals__", {}))
    shim.__annotations__ = annotations
    return typing.get_type_hints(shim, include_extras=True)


def _is_context(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    # Optional[ToolContext] / Annotated[ToolContext, ...] are still the context.
    return ToolContext in typing.get_args(annotation)


def _strip_titles(node: Any) -> Any:
    """pydantic's generated ``title`` keys, gone: noise for the model. A property that is
    itself called "title" is kept (it sits under ``properties``)."""
    if isinstance(node, dict):
        return {
            key: (
                {name: _strip_titles(sub) for name, sub in value.items()}
                if key in ("properties", "$defs") and isinstance(value, dict)
                else _strip_titles(value)
            )
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    return node


def function_signature(func: Callable[..., Any], *, name: str) -> FunctionSignature:
    """Derive the tool's schema and validator from ``func`` (see the module's docstring)."""
    description, param_docs = _docstring(func)
    try:
        hints = _parameter_hints(func)
    except Exception as exc:  # a forward reference that does not resolve
        raise ToolDefinitionError(f"tool {name}: cannot read its type hints: {exc}") from exc
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {name}: *{param.name} / **{param.name} cannot be described to a model; "
                "name each argument"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"tool {name}: parameter {param.name} is positional-only; tools are called "
                "with keyword arguments"
            )
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            if context_param is not None:
                raise ToolDefinitionError(f"tool {name}: more than one ToolContext parameter")
            context_param = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, Field(default, description=param_docs.get(param.name)))
    try:
        arguments = create_model(
            f"{name}_arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        schema = arguments.model_json_schema()
    except Exception as exc:  # a type pydantic cannot validate or describe
        raise ToolDefinitionError(f"tool {name}: {exc}") from exc
    return FunctionSignature(
        description=description,
        input_schema=_strip_titles(schema),
        arguments=arguments,
        context_param=context_param,
    )


def validation_problem(name: str, error: ValidationError) -> str:
    """The model-facing message for input that does not fit the tool's parameters."""
    details = "; ".join(
        f"{'/'.join(str(p) for p in e['loc']) or '(input)'}: {e['msg']}" for e in error.errors()
    )
    return f"invalid input for tool {name!r}: {details}"


def validate_arguments(
    signature: FunctionSignature, name: str, arguments: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """``(keyword arguments, None)`` for valid input, ``(None, problem)`` otherwise. The
    arguments keep the types the hints name (a nested pydantic model stays a model)."""
    try:
        parsed = signature.arguments.model_validate(dict(arguments))
    except ValidationError as exc:
        return None, validation_problem(name, exc)
    return {field: getattr(parsed, field) for field in type(parsed).model_fields}, None
