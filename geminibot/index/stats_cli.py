"""``geminibot stats``: what a crawl database holds, SQLite or PostgreSQL, in numbers or
as its URLs.

A command of its own beside ``search`` (:mod:`geminibot.index.search_cli`), so that
each imports and builds only what it runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    emit_json,
    positive_int,
    terminal_safe,
)
from geminibot.index.stats import URL_STATES, format_stats, list_urls, stats, status_filter
from geminibot.index.tantivy_index import index_lag
from geminibot.store.database import Database, open_database


def register(commands: Any) -> None:
    numbers = commands.add_parser(
        "stats",
        help="what a crawl database holds",
        description="Counts of what a crawl database holds; with --urls, the URLs themselves "
        "(filtered by --status and --host), one per line: state, status, URL, reason.",
    )
    numbers.add_argument(
        "--db", required=True, metavar="PATH|URL", help="crawl database (file or postgresql://)"
    )
    numbers.add_argument(
        "--urls", action="store_true", help="list the URLs instead of counting them"
    )
    numbers.add_argument(
        "--status",
        metavar="STATUS",
        help="with --urls: a state (" + ", ".join(URL_STATES) + "), a status (51, 404) or a "
        "class of them (5x)",
    )
    numbers.add_argument(
        "--host", metavar="PATTERN", help="with --urls: hosts matching this shell pattern"
    )
    numbers.add_argument(
        "--limit",
        type=positive_int,
        metavar="N",
        help="with --urls: at most N URLs (default: all)",
    )
    numbers.add_argument("--json", action="store_true", help="one JSON object (per URL)")
    numbers.set_defaults(run=run_stats)


def run_stats(args: argparse.Namespace) -> int:
    if not args.urls and (args.status or args.host or args.limit is not None):
        raise CommandError("stats: --status, --host and --limit go with --urls")
    if args.urls:
        try:
            status_filter(args.status)
        except ValueError as exc:
            raise CommandError(f"stats: {exc}") from None
    with open_database(args.db) as database:
        if args.urls:
            return _list_urls(database, args)
        data = stats(database, lag=index_lag(database))
    if args.json:
        emit_json(data)
    else:
        print(format_stats(data))
    return EXIT_OK


def _list_urls(database: Database, args: argparse.Namespace) -> int:
    """``stats --urls``."""
    rows = list_urls(database, status=args.status, host=args.host, limit=args.limit)
    for row in rows:
        if args.json:
            emit_json(row.as_json())
        else:
            status = "-" if row.status is None else str(row.status)
            reason = f"  {terminal_safe(row.reason)}" if row.reason else ""
            print(f"{row.state:<8} {status:>3}  {terminal_safe(row.url)}{reason}")
    if not rows and not args.json:
        print("no URLs match", file=sys.stderr)
    return EXIT_OK if rows else EXIT_NEGATIVE
