"""Package attributes loaded on first use (PEP 562), so importing a package costs only what
its caller touches: a Lambda handler's import must not load the AWS SDK, every provider
adapter and the run loop before its first invocation needs them.

A package states its public names once, as the ``X as X`` imports of its
``if TYPE_CHECKING:`` block: type checkers read those (the redundant alias is the typing
convention for a re-export), and :func:`lazy_exports` reads the same block from the
package's source to know which module defines each name, so no second list can drift.
"""

from __future__ import annotations

import ast
import importlib
import os
from collections.abc import Callable
from typing import Any


def exported_names(source: str) -> dict[str, str]:
    """Name -> defining module, from the ``from M import X as X`` statements of the
    ``if TYPE_CHECKING:`` blocks at the top level of ``source`` (pure)."""
    names: dict[str, str] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom) or statement.module is None:
                raise TypeError(
                    f"only 'from M import X as X' belongs here: {ast.unparse(statement)}"
                )
            for alias in statement.names:
                if alias.asname != alias.name:
                    raise TypeError(f"export {alias.name} as {alias.name} (a re-export)")
                names[alias.name] = statement.module
    return names


def lazy_exports(
    package: str,
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for ``package``, from the names its
    ``TYPE_CHECKING`` block re-exports."""
    names = exported_names(_source_of(package))
    getattr_, dir_ = lazy_attributes(package, names)
    return getattr_, dir_, sorted(names)


def _source_of(package: str) -> str:
    """The package's ``__init__`` source. Read from the file it was imported from first: the
    loader need not serve sources (pytest's assertion rewriter, which imports a pytest
    plugin's package such as ``awaken_s3.testing``'s, has no ``get_source``)."""
    spec = importlib.import_module(package).__spec__
    origin = spec.origin if spec is not None else None
    if origin is not None and origin.endswith(".py") and os.path.isfile(origin):
        with open(origin, encoding="utf-8") as file:
            return file.read()
    get_source = getattr(spec.loader, "get_source", None) if spec is not None else None
    source = get_source(package) if get_source is not None else None
    if source is None:
        raise ImportError(f"{package}: its source is needed to read its exports")
    return str(source)


def lazy_attributes(
    package: str, names: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``names`` maps each public name to
    the module that defines it."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
