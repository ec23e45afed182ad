"""``awaken-s3 init DIR``: its options, and what it tells the user after writing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO, cast

from awaken_s3.project.scaffold import PROVIDERS, ProjectError, ProjectSpec, Provider

NOT_ON_AN_INDEX = """\
While awaken-s3 is not on a package index, point pip (and sam build, which runs pip) at it:
  a wheel:       pip wheel --no-deps /path/to/awaken-s3 -w wheels/
                 export PIP_FIND_LINKS=$PWD/wheels
  a checkout:    in layer/requirements.txt, write the awaken-s3 line as
                 awaken-s3{extra} @ git+https://github.com/<owner>/awaken-s3@<tag or commit>
                 (or awaken-s3{extra} @ file:///path/to/awaken-s3 for a local clone)"""


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
        written = write_project(directory, spec)
    except ProjectError as exc:
        print(f"awaken-s3 init: {exc}", file=sys.stderr)
        return 2
    print(f"awaken-s3 init: wrote {len(written)} files in {directory}:", file=out)
    for path in written:
        print(f"  {path.relative_to(directory)}", file=out)
    extra = "" if spec.provider == "bedrock" else f"[{spec.provider}]"
    print(
        "\nNext, in that directory:\n"
        "  python3 -m venv .venv && . .venv/bin/activate\n"
        "  pip install -e '.[dev]'\n"
        "  pytest                              # the agent on moto, killed and resumed\n"
        "  awaken-s3 dev                       # the local stack and its console\n"
        "  sam build && sam deploy --guided    # to AWS\n\n" + NOT_ON_AN_INDEX.format(extra=extra),
        file=out,
    )
    return 0
