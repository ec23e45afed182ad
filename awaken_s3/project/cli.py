"""``awaken-s3 init DIR``: its options, and what it tells the user after writing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO, cast

from awaken_s3.project.scaffold import PROVIDERS, ProjectError, ProjectSpec, Provider
from awaken_s3.project.source import InstallRecordError, Source, installed_source


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = sub.add_parser(
        "init",
        help="write a new project: your agents, their tests, and the stack's template",
        description=(
            "Write a project that depends on awaken-s3: an app with one agent and two tools, "
            "the three Lambda entry points, tests on moto through awaken-s3's pytest plugin, "
            "template.yaml (awaken-s3's stack, your code in it), samconfig.toml and a README. "
            "Refuses to write over any existing file."
        ),
    )
    init.add_argument("directory", type=Path, help="where (made if missing; its name names it)")
    init.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="bedrock",
        help="the model provider the project deploys with (its SDK is the dependency's extra)",
    )
    init.add_argument(
        "--package", help="the Python package (default: the directory's name, as an identifier)"
    )


def run(args: argparse.Namespace, *, out: TextIO = sys.stdout) -> int:
    from awaken_s3.project.scaffold import write_project

    directory: Path = args.directory
    try:
        spec = ProjectSpec.for_directory(
            directory, provider=cast(Provider, args.provider), package=args.package
        )
        source = installed_source()
        written = write_project(directory, spec, source)
    except (ProjectError, InstallRecordError) as exc:
        print(f"awaken-s3 init: {exc}", file=sys.stderr)
        return 2
    print(f"awaken-s3 init: wrote {len(written)} files in {directory}:", file=out)
    for path in written:
        print(f"  {path.relative_to(directory)}", file=out)
    print(
        "\nNext, in that directory:\n"
        "  python3 -m venv .venv && . .venv/bin/activate\n"
        "  pip install -e '.[dev]'\n"
        "  pytest                              # the agent on moto, killed and resumed\n"
        "  awaken-s3 dev                       # the local stack and its console\n"
        "  sam build && sam deploy --guided    # to AWS\n",
        file=out,
    )
    print(where_awaken_s3_comes_from(source, spec.provider), file=out)
    return 0


def where_awaken_s3_comes_from(source: Source, provider: Provider) -> str:
    """What the project's awaken-s3 requirement is, and what it takes to keep it installable."""
    requirement = source.requirement(*(() if provider == "bedrock" else (provider,)))
    said = (
        "The project requires awaken-s3 from where this one was installed, so pip and sam build\n"
        "need no index holding it (layer/requirements.txt, and the dev extra of pyproject.toml):\n"
        f"  {requirement}\n"
        f"  ({source.describe()})"
    )
    where = source.local_path()
    if where is not None and not where.exists():
        said += (
            f"\nwarning: {where} is not there any more, so the project cannot install it;\n"
            'point both lines at a place that has awaken-s3 (README.md, "Where awaken-s3 '
            'comes from").'
        )
    return said
