"""The largest classes and functions of the shipped code, and the handler files' sizes.

Run: .venv/bin/python benchmarks/code_sizes.py [--rev REV] [--top N]

Reads ``awaken_s3/`` and ``handlers/`` as they are in the working tree, or as they were at a
git revision (``--rev``, read with ``git show``, so no checkout is needed), and prints:

  classes     the N longest class bodies (lines from ``class`` to its last statement)
  functions   the N longest functions and methods, nested ones included
  handlers    the line count of every file under handlers/ and awaken_s3/service/

Sizes are line spans from the syntax tree (Python's own ``ast``, no third-party metric), so
docstrings and comments inside a definition count: they are what a reader scrolls through.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("awaken_s3", "handlers")
HANDLER_FILES = ("handlers", "awaken_s3/service")


@dataclass(frozen=True)
class Definition:
    kind: str
    name: str
    path: str
    lines: int


def python_files(rev: str | None) -> dict[str, str]:
    """Path -> source text of every .py file under SOURCES, at ``rev`` or in the work tree."""
    if rev is None:
        return {
            str(path.relative_to(ROOT)): path.read_text()
            for root in SOURCES
            for path in sorted((ROOT / root).rglob("*.py"))
        }
    listing = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "--", *SOURCES],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return {
        path: subprocess.run(
            ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        for path in listing
        if path.endswith(".py")
    }


def definitions(path: str, source: str) -> list[Definition]:
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            span = (node.end_lineno or node.lineno) - node.lineno + 1
            found.append(Definition(kind, node.name, f"{path}:{node.lineno}", span))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="a git revision (default: the working tree)")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument(
        "--quick", action="store_true", help="the 3 largest of each (it takes seconds anyway)"
    )
    args = parser.parse_args()
    if args.quick:
        args.top = 3
    files = python_files(args.rev)
    found = [d for path, source in files.items() for d in definitions(path, source)]
    print(f"# {args.rev or 'working tree'}: {len(files)} files under {', '.join(SOURCES)}")
    for kind in ("class", "function"):
        print(f"\nlargest {kind}es" if kind == "class" else f"\nlargest {kind}s")
        ranked = sorted((d for d in found if d.kind == kind), key=lambda d: -d.lines)
        for d in ranked[: args.top]:
            print(f"  {d.lines:5d}  {d.name}  ({d.path})")
    print("\nhandler files (lines)")
    for path, source in sorted(files.items()):
        if path.startswith(HANDLER_FILES) and not path.endswith("__init__.py"):
            print(f"  {len(source.splitlines()):5d}  {path}")


if __name__ == "__main__":
    main()
