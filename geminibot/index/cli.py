"""``geminibot index``: link authority and the derived top-k search index of a crawl."""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from geminibot.cliutil import EXIT_NEGATIVE, EXIT_OK, CommandError, emit_json
from geminibot.index.authority import compute_authority, crawl_seeds
from geminibot.index.db import DatabaseError, connect
from geminibot.index.tantivy_index import IndexUnavailable, index_dir, rebuild, status

#: Seconds between two progress lines.
PROGRESS_INTERVAL = 2.0


def register(commands: Any) -> None:
    index = commands.add_parser(
        "index",
        help="rank a crawl's pages by links and build its fast search index",
        description=(
            "'index rebuild' computes link authority (TrustRank over the links between "
            "hosts, trusting the crawl's seeds) into the database, then builds the tantivy "
            "search index beside it (DB.search/), which 'geminibot search' uses while it is "
            "current. Run it after a crawl; deleting DB.search/ loses nothing."
        ),
    )
    actions = index.add_subparsers(title="actions", metavar="ACTION")
    build = actions.add_parser("rebuild", help="recompute authority, rebuild the search index")
    build.add_argument("--db", required=True, metavar="PATH", help="crawl database")
    build.add_argument(
        "--trust",
        action="append",
        default=[],
        metavar="URL",
        help="trust this URL's host (repeatable; default: the crawl's seeds)",
    )
    build.add_argument("--trust-all", action="store_true", help="trust every host (plain PageRank)")
    build.add_argument("--json", action="store_true", help="summary as one JSON object")
    build.set_defaults(run=run_rebuild)
    show = actions.add_parser("status", help="whether the search index is built and current")
    show.add_argument("--db", required=True, metavar="PATH", help="crawl database")
    show.add_argument("--json", action="store_true", help="one JSON object")
    show.set_defaults(run=run_status)
    index.set_defaults(run=lambda _args: _usage(index))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _open(path: str) -> sqlite3.Connection:
    try:
        return connect(path, create=False)
    except DatabaseError as exc:
        raise CommandError(str(exc)) from None


def _progress(quiet: bool) -> Any:
    last = [0.0]

    def say(message: str) -> None:
        now = time.monotonic()
        if not quiet and now - last[0] >= PROGRESS_INTERVAL:
            last[0] = now
            print(f"index: {message}", file=sys.stderr, flush=True)

    return say


def run_rebuild(args: argparse.Namespace) -> int:
    if args.trust and args.trust_all:
        raise CommandError("--trust and --trust-all exclude each other")
    conn = _open(args.db)
    say = _progress(args.json)
    trusted = [] if args.trust_all else (args.trust or crawl_seeds(conn))
    pages = int(conn.execute("SELECT count(*) FROM pages WHERE text_indexed").fetchone()[0])
    if not pages:
        raise CommandError(f"{args.db}: no pages with text to index yet", EXIT_NEGATIVE)
    try:
        authority = compute_authority(conn, trusted, say)
        built = rebuild(conn, say)
    except (IndexUnavailable, OSError, ValueError) as exc:
        raise CommandError(f"index rebuild: {exc}", EXIT_NEGATIVE) from None
    seconds = float(authority["seconds"]) + float(str(built["seconds"]))
    summary: dict[str, object] = {
        "pages": built["pages"],
        "hosts": int(authority["hosts"]),
        "host_links": int(authority["links"]),
        "trusted_hosts": int(authority["trusted"]) or "all",
        "index": str(index_dir(Path(args.db))),
        "bytes": built["bytes"],
        "seconds": round(seconds, 2),
    }
    if args.json:
        emit_json(summary)
    else:
        mib = int(str(built["bytes"])) / 2**20
        print(
            f"indexed {summary['pages']} pages; authority over {summary['hosts']} hosts "
            f"({summary['host_links']} links between them, trusted: "
            f"{summary['trusted_hosts']}); {summary['index']} ({mib:.1f} MiB) "
            f"in {seconds:.1f} s"
        )
    return EXIT_OK


def run_status(args: argparse.Namespace) -> int:
    conn = _open(args.db)
    data = status(conn)
    if args.json:
        emit_json(data)
    elif not data["built"]:
        print(f"no search index at {data['path']}: 'geminibot search' uses FTS5")
    else:
        state = "current" if data["current"] else "stale (the crawl has moved on): FTS5 is used"
        print(f"{data['path']}: {data['pages']} pages, {state}")
    return EXIT_OK if data["current"] else EXIT_NEGATIVE
