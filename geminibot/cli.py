"""The ``geminibot`` command. Each package registers its own subcommands here.

A command's module is imported only when that command runs (or its help is asked for):
``geminibot fetch`` does not pay for importing the crawler, the index and the portal,
nor for building the other commands' parsers. The top-level ``--help`` (and the error
for an unknown command) lists every command from :data:`COMMANDS`, which holds each
command's name and one-line help as its module registers them (``tests/test_cli.py``
checks that the two agree, so the help reads the same as when every module is loaded).
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from geminibot import __version__
from geminibot.cliutil import Parser, run_command

#: What a package's ``register(commands)`` looks like.
Register = Callable[[Any], None]


def _policy() -> Register:
    from geminibot.policy import cli

    return cli.register


def _gemini() -> Register:
    from geminibot.gemini import cli

    return cli.register


def _classify() -> Register:
    from geminibot.classify import cli

    return cli.register


def _crawl() -> Register:
    from geminibot.crawl import cli

    return cli.register


def _search() -> Register:
    from geminibot.index import search_cli

    return search_cli.register


def _stats() -> Register:
    from geminibot.index import stats_cli

    return stats_cli.register


def _compare() -> Register:
    from geminibot.classify import compare_cli

    return compare_cli.register


def _db() -> Register:
    from geminibot.store import migrate

    return migrate.register


def _portal() -> Register:
    from geminibot.portal import cli

    return cli.register


def _index() -> Register:
    from geminibot.index import cli

    return cli.register


def _census() -> Register:
    from geminibot.census import cli

    return cli.register


def _why() -> Register:
    from geminibot.why import cli

    return cli.register


def _export() -> Register:
    from geminibot.export import cli

    return cli.register


def _service() -> Register:
    from geminibot.service import cli

    return cli.register


def _feeds() -> Register:
    from geminibot.feeds import cli

    return cli.register


def _searchcap() -> Register:
    from geminibot.searchcap import cli

    return cli.register


class Module(NamedTuple):
    """One package's commands: their names and one-line helps, in the order its
    ``register`` adds them, and how to import that ``register``."""

    load: Callable[[], Register]
    commands: tuple[tuple[str, str], ...]


#: Every command, in the order ``geminibot --help`` lists them.
COMMANDS: tuple[Module, ...] = (
    Module(_policy, (("policy", "check URLs against robots.txt and lint policy files"),)),
    Module(_gemini, (("fetch", "fetch a gemini:// URL (a curl for Gemini)"),)),
    Module(
        _classify,
        (
            (
                "classify",
                "which virtual agents and robots2.txt categories a bot is, and what it must obey",
            ),
        ),
    ),
    Module(
        _crawl,
        (
            (
                "crawl",
                "crawl Gemini capsules (and websites) politely into a searchable SQLite index",
            ),
        ),
    ),
    Module(_search, (("search", "search a crawl's index"),)),
    Module(_stats, (("stats", "what a crawl database holds"),)),
    Module(_census, (("census", "figures of Geminispace as a crawl saw it"),)),
    Module(
        _compare,
        (("compare", "where a host's web and Gemini policies disagree, and for which bots"),),
    ),
    Module(_db, (("db", "crawl databases: move a crawl to PostgreSQL"),)),
    Module(
        _portal,
        (("portal", "serve Gemini capsules to web browsers, obeying their webproxy rules"),),
    ),
    Module(
        _index,
        (("index", "rank a crawl's pages by links and build its fast search index"),),
    ),
    Module(
        _why,
        (
            ("why", "why a page is in a crawl's index or not, or what it knows of a host"),
            ("recheck", "fetch a page, or every page of a host, again soon, at the capsule's pace"),
        ),
    ),
    Module(
        _export,
        (("export", "a crawl database as open data: Parquet files in Common Crawl's columns"),),
    ),
    Module(
        _feeds,
        (("feeds", "the feeds a crawl found (gemsub, Atom, RSS, twtxt), and what is new in them"),),
    ),
    Module(_searchcap, (("serve-search", "serve a crawl's index as a Gemini search capsule"),)),
    Module(
        _service,
        (("serve", "run crawl, index updates, search capsule and portal as one service"),),
    ),
)

ALL = frozenset(name for module in COMMANDS for name, _ in module.commands)


def chosen(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the top-level
    parser's options take no values), or None."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


def build_parser(only: str | None = None, *, load_all: bool = True) -> argparse.ArgumentParser:
    """The whole parser. With ``load_all=False`` only the module of command ``only`` is
    imported and only its commands are built; when ``only`` names no command (the
    top-level help, a mistyped command), every command is a stand-in that shows the
    same name and help."""
    parser = Parser(
        prog="geminibot",
        description=(
            "Well-behaved bots for Gemini and the web. "
            "Run 'geminibot COMMAND --help' for the details of each command."
        ),
    )
    parser.add_argument("--version", action="version", version=f"geminibot {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for module in COMMANDS:
        if load_all or any(name == only for name, _ in module.commands):
            module.load()(commands)
        elif only not in ALL:
            for name, help_text in module.commands:
                commands.add_parser(name, help=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names, by default the process's own command line. Run as
    the process's command, it freezes what is left as it returns (:func:`gc.freeze`): the
    interpreter's exit then does not walk every object start-up made, all freed with the
    process anyway, for garbage (about an eighth of a search's CPU time)."""
    words = sys.argv[1:] if argv is None else list(argv)
    code = run_command(build_parser(chosen(words), load_all=False), words)
    if argv is None:
        gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(main())
