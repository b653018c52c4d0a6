"""``geminibot index``: link authority and the derived top-k search index of a crawl."""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    StopSignals,
    emit_json,
    human_duration,
    positive_float,
    terminal_safe,
)
from geminibot.index.authority import compute_authority, crawl_seeds, last_computed
from geminibot.index.authority_job import refresh, schedule
from geminibot.index.tantivy_index import IndexUnavailable, index_dir, rebuild, status
from geminibot.index.updater import COMMIT_INTERVAL, IndexUpdater, follow, verify
from geminibot.store import pg
from geminibot.store.db import DatabaseError, connect

#: Seconds between two progress lines.
PROGRESS_INTERVAL = 2.0
DB_HELP = (
    "crawl database: an SQLite file, or postgresql://... (authority only: PostgreSQL "
    "searches its own index)"
)


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
    build.add_argument("--db", required=True, metavar="PATH|URL", help=DB_HELP)
    _trust_options(build)
    build.add_argument("--json", action="store_true", help="summary as one JSON object")
    build.set_defaults(run=run_rebuild)
    rank = actions.add_parser(
        "authority",
        help="recompute link authority and apply it to search (no rebuild)",
        description=(
            "Compute link authority (TrustRank over the links between hosts, trusting the "
            "crawl's seeds) into the database and apply it to search at once: the tantivy "
            "index's searches read the new weights from their next query, without "
            "rebuilding or re-adding a page; PostgreSQL's search reads them from the "
            "database. With --every, keep doing so every SECONDS (the first time when the "
            "last computation is that old) until SIGTERM or SIGINT, one line per run."
        ),
    )
    rank.add_argument("--db", required=True, metavar="PATH|URL", help=DB_HELP)
    _trust_options(rank)
    rank.add_argument(
        "--every",
        type=positive_float,
        metavar="SECONDS",
        help="compute again every SECONDS until stopped (default: once)",
    )
    rank.add_argument("--json", action="store_true", help="one JSON object per run")
    rank.set_defaults(run=run_authority)
    show = actions.add_parser("status", help="whether the search index is built and current")
    show.add_argument("--db", required=True, metavar="PATH", help="crawl database")
    show.add_argument(
        "--verify",
        action="store_true",
        help="also compare the index's pages with the store's, one by one (exit 0 only "
        "when they agree)",
    )
    show.add_argument("--json", action="store_true", help="one JSON object")
    show.set_defaults(run=run_status)
    update = actions.add_parser(
        "update",
        help="apply the crawl's changes to the search index (building it if missing)",
        description=(
            "Apply to the search index the pages fetched, changed, gone or delisted since "
            "it last recorded a change, in small commits; with --follow, keep doing so "
            f"every {COMMIT_INTERVAL:g} s until SIGTERM or SIGINT (Ctrl-C). 'geminibot "
            "search' and 'serve-search' read each new commit. Safe to stop at any moment: "
            "the next run catches up from what the index recorded."
        ),
    )
    update.add_argument("--db", required=True, metavar="PATH", help="crawl database")
    update.add_argument(
        "--follow", action="store_true", help="keep applying changes as the crawl makes them"
    )
    update.add_argument("--json", action="store_true", help="summary as one JSON object")
    update.set_defaults(run=run_update)
    index.set_defaults(run=lambda _args: _usage(index))


def _trust_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trust",
        action="append",
        default=[],
        metavar="URL",
        help="trust this URL's host (repeatable; default: the crawl's seeds)",
    )
    parser.add_argument(
        "--trust-all", action="store_true", help="trust every host (plain PageRank)"
    )


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


def _trusted_and_pages(args: argparse.Namespace, conn: Any) -> tuple[list[str], int]:
    """The hosts to trust and the pages with text (either store's connection)."""
    trusted = _trusted(args, conn)
    pages = int(conn.execute("SELECT count(*) FROM pages WHERE text_indexed").fetchone()[0])
    if not pages:
        raise CommandError(f"{pg.display(args.db)}: no pages with text to index yet", EXIT_NEGATIVE)
    return trusted, pages


def run_rebuild(args: argparse.Namespace) -> int:
    if args.trust and args.trust_all:
        raise CommandError("--trust and --trust-all exclude each other")
    if pg.is_postgres(args.db):  # authority only: PostgreSQL searches its own index
        args.every = None
        return run_authority(args)
    conn = _open(args.db)
    say = _progress(args.json)
    trusted, _pages = _trusted_and_pages(args, conn)
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


def _trusted(args: argparse.Namespace, conn: Any) -> list[str]:
    """The URLs whose hosts to trust (either store's connection)."""
    return [] if args.trust_all else (args.trust or crawl_seeds(conn))


def _connect(db: str) -> Any:
    """Either store's connection to ``db``."""
    if not pg.is_postgres(db):
        return _open(db)
    try:
        return pg.connect(db)
    except DatabaseError as exc:
        raise pg.command_error(exc) from None


def run_authority(args: argparse.Namespace) -> int:
    if args.trust and args.trust_all:
        raise CommandError("--trust and --trust-all exclude each other")
    conn = _connect(args.db)
    try:
        if args.every is None:
            summary = refresh(conn, _trusted(args, conn), _progress(args.json))
            if summary is None:
                raise CommandError(
                    f"{pg.display(args.db)}: no pages with text to rank yet", EXIT_NEGATIVE
                )
            _report_authority(args, summary)
            return EXIT_OK
        with StopSignals() as stop:
            schedule(
                lambda: scheduled_run(args, conn),
                args.every,
                last_computed(conn),
                stop.is_set,
                stop.wait,
            )
        return EXIT_OK
    finally:
        conn.close()


def scheduled_run(args: argparse.Namespace, conn: Any) -> bool:
    """One run of ``index authority --every``: reported on one line, a failure too (the
    next run is at the next interval; a connection lost ends the command, with exit 1,
    for its supervisor to start it again)."""
    errors = _store_errors(args.db)
    try:
        summary = refresh(conn, _trusted(args, conn), _progress(True))
    except errors as exc:
        _report_authority(args, {"error": terminal_safe(str(exc))})
        if not isinstance(conn, sqlite3.Connection) and conn.closed:
            raise CommandError(f"{pg.display(args.db)}: connection lost", EXIT_NEGATIVE) from None
        _rollback(conn)
        return True
    if summary is None:
        _report_authority(args, {"skipped": "no pages with text yet"})
        return False
    _report_authority(args, summary)
    return True


def _store_errors(db: str) -> tuple[type[BaseException], ...]:
    """What a store's connection raises when a statement fails (locked, lost, full)."""
    if pg.is_postgres(db):
        import psycopg

        return (psycopg.Error, OSError)
    return (sqlite3.Error, OSError)


def _rollback(conn: Any) -> None:
    if not isinstance(conn, sqlite3.Connection) or conn.in_transaction:
        conn.rollback()


def _report_authority(args: argparse.Namespace, summary: dict[str, object]) -> None:
    if args.json:
        emit_json(summary)
    elif "error" in summary:
        print(f"authority: failed: {summary['error']}")
    elif "skipped" in summary:
        print(f"authority: skipped: {summary['skipped']}")
    else:
        print(
            f"authority of {summary['pages']} pages over {summary['hosts']} hosts "
            f"({summary['host_links']} links between them, trusted: "
            f"{summary['trusted_hosts']}) in {summary['seconds']} s; applied to "
            f"{summary['applied_to']}"
        )
    sys.stdout.flush()


def _sqlite_only(action: str, db: str) -> None:
    if pg.is_postgres(db):
        raise CommandError(
            f"index {action}: a PostgreSQL database has no tantivy index "
            "(its search uses its own GIN index, always current)"
        )


def _state(data: dict[str, Any]) -> str:
    if data["current"]:
        return "current"
    if data["following"]:
        return f"{data['pending']} changes pending, an updater is applying them"
    return f"stale ({data['pending']} changes pending): FTS5 is used"


def _authority_state(data: dict[str, Any], now: float) -> str:
    """One line on link authority: when computed, and whether search applies it."""
    computed = data["computed_at"]
    if computed is None:
        return "link authority: never computed ('geminibot index authority'): text ranks alone"
    ago = human_duration(max(0.0, now - float(computed)))
    if data["current"]:
        return f"link authority: computed {ago} ago, applied to search ({data['hosts']} hosts)"
    if data["applied_at"] is None:
        return f"link authority: computed {ago} ago, not applied: search ranks by text alone"
    older = human_duration(max(0.0, now - float(data["applied_at"])))
    return f"link authority: computed {ago} ago; search applies the one of {older} ago"


def run_status(args: argparse.Namespace) -> int:
    _sqlite_only("status", args.db)
    conn = _open(args.db)
    data: dict[str, Any] = status(conn)
    if data["built"] and args.verify:
        data["verify"] = verify(conn)
    if args.json:
        emit_json(data)
    elif not data["built"]:
        print(f"no search index at {data['path']}: 'geminibot search' uses FTS5")
    else:
        print(f"{data['path']}: {data['pages']} pages, {_state(data)}")
        print(_authority_state(data["authority"], time.time()))
        if args.verify:
            _print_verify(data["verify"])
    agree = data["current"] and (not args.verify or data["verify"]["agree"])
    return EXIT_OK if agree else EXIT_NEGATIVE


def _print_verify(check: dict[str, Any]) -> None:
    if check["agree"]:
        print(f"verified: the index and the store both hold {check['store_pages']} pages")
        return
    print(f"differ: store {check['store_pages']} pages, index {check['index_pages']}")
    for key, what in (
        ("missing", "in the store, not the index"),
        ("extra", "in the index, not the store"),
    ):
        if check[f"{key}_count"]:
            ids = ", ".join(str(i) for i in check[key])
            print(f"  {check[key + '_count']} {what} (page ids {ids}...)")
    if check["duplicated"]:
        print(f"  {check['duplicated']} documents twice in the index")
    print("repair: 'geminibot index update --db PATH', or 'geminibot index rebuild'")


def run_update(args: argparse.Namespace) -> int:
    _sqlite_only("update", args.db)
    conn = _open(args.db)
    say = _progress(args.json)
    stop = StopSignals()
    started = time.monotonic()
    try:
        with stop, IndexUpdater(conn, say) as updater:
            applied = updater.catch_up()
            if args.follow:
                applied += follow(updater, stop.is_set, stop.wait)
            summary = {
                "applied": applied,
                "pages": updater.manifest["pages"],
                "pending": updater.pending(),
                "seconds": round(time.monotonic() - started, 2),
            }
    except (IndexUnavailable, OSError, ValueError) as exc:
        raise CommandError(f"index update: {exc}", EXIT_NEGATIVE) from None
    if args.json:
        emit_json(summary)
    else:
        print(
            f"applied {summary['applied']} changes; the index holds {summary['pages']} pages"
            f" ({summary['pending']} changes pending) after {summary['seconds']} s"
        )
    return EXIT_OK
