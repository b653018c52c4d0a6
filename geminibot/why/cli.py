"""``geminibot why URL|HOST --db PATH``: why a page is in the search index or not, or what
the crawl knows of a host (the answer of :func:`geminibot.why.check`)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from geminibot.cliutil import EXIT_NEGATIVE, EXIT_OK, CommandError, emit_json
from geminibot.store.database import open_database
from geminibot.why import Answer, BadTarget, check
from geminibot.why.render import text_lines


def register(commands: Any) -> None:
    p = commands.add_parser(
        "why",
        help="why a page is in a crawl's index or not, or what it knows of a host",
        description=(
            "For a URL: whether the page is searchable and, if not, the one reason (the "
            "policy line that refused it, a policy file that could not be read, a trap or "
            "depth bound, a duplicate, failed requests, gone, --exclude, a host not "
            "followed, not reached yet, never linked); when it was last fetched, what came "
            "back, when it will be looked at again, who links to it. For a host (no "
            "'/'): its policy files, their lint findings, what each virtual agent may do, "
            "the delay, and its URLs by state. Exit status: 0 searchable (or a host), "
            "1 not searchable, 2 a usage error."
        ),
    )
    p.add_argument("target", metavar="URL|HOST", help="gemini://host/path, or a host name")
    p.add_argument(
        "--db",
        required=True,
        metavar="PATH|URL",
        help="crawl database: an SQLite file, or postgresql://USER@HOST/DB",
    )
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(run=run_why)


def run_why(args: argparse.Namespace) -> int:
    with open_database(args.db) as database:
        try:
            answer = check(database, args.target, time.time())
        except BadTarget as exc:
            raise CommandError(f"{args.target!r}: {exc}") from None
    if args.json:
        emit_json(answer.as_dict())
    else:
        sys.stdout.write("\n".join(text_lines(answer)) + "\n")
    if isinstance(answer, Answer) and not answer.searchable:
        return EXIT_NEGATIVE
    return EXIT_OK
