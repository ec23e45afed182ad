"""The ``awaken-s3`` command line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="awaken-s3",
        description="Streaming LLM turns that survive the death of the process running them.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="kill a worker mid-stream and resume the turn in a new process")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        try:
            from awaken_s3.demo.scenario import run_demo
        except ModuleNotFoundError as exc:
            parser.error(
                f"the demo needs the 'demo' extra ({exc.name} is missing): "
                "pip install 'awaken-s3[demo]'"
            )
        return run_demo()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
