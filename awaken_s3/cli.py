"""The ``awaken-s3`` command line."""

from __future__ import annotations

import argparse
import sys
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
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        print(
            "awaken-s3 demo: the end-to-end demo is not built yet "
            "(it lands with the run loop and the handlers).",
            file=sys.stderr,
        )
        return 2
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
