"""The ``capsule-server`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="capsule-server",
        description="Serve test capsules over Gemini and report which bots broke their policy.",
    )
    parser.add_subparsers(title="commands", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    code: int = run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
