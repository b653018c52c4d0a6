"""The ``geminibot`` command. Each package registers its own subcommands here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from geminibot import __version__
from geminibot.classify import cli as classify_cli
from geminibot.classify import compare_cli
from geminibot.cliutil import Parser, run_command
from geminibot.crawl import cli as crawl_cli
from geminibot.crawl import migrate as db_cli
from geminibot.gemini import cli as gemini_cli
from geminibot.index import cli as index_cli
from geminibot.policy import cli as policy_cli
from geminibot.portal import cli as portal_cli
from geminibot.searchcap import cli as searchcap_cli


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="geminibot",
        description=(
            "Well-behaved bots for Gemini and the web. "
            "Run 'geminibot COMMAND --help' for the details of each command."
        ),
    )
    parser.add_argument("--version", action="version", version=f"geminibot {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    policy_cli.register(commands)
    gemini_cli.register(commands)
    classify_cli.register(commands)
    crawl_cli.register(commands)
    compare_cli.register(commands)
    db_cli.register(commands)
    portal_cli.register(commands)
    index_cli.register(commands)
    searchcap_cli.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
