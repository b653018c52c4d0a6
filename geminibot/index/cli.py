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
    counted,
    emit_json,
    human_duration,
    positive_float,
    terminal_safe,
)
from geminibot.index.authority import compute_authority
from geminibot.index.authority_job import Reach, refresh, schedule, store_reach
from geminibot.index.tantivy_index import IndexUnavailable, index_dir, rebuild, status
from geminibot.index.updater import COMMIT_INTERVAL, IndexUpdater, follow, verify
from geminibot.store.authority import Connection, crawl_seeds, last_computed
from geminibot.store.database import Database, open_database

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
            "last computation is that old; on a store never ranked, once the crawl has been "
            "round its seeds' reach; sooner when the store has grown fourfold) until "
            "SIGTERM or SIGINT, one line per run."
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


def _sqlite_only(action: str, database: Database) -> sqlite3.Connection:
    """The SQLite connection of ``database``: the tantivy index is built beside a file."""
    conn = database.sqlite
    if conn is None:
        raise CommandError(
            f"index {action}: a PostgreSQL database has no tantivy index "
            "(its search uses its own GIN index, always current)"
        )
    return conn


def _progress(quiet: bool) -> Any:
    last = [0.0]

    def say(message: str) -> None:
        now = time.monotonic()
        if not quiet and now - last[0] >= PROGRESS_INTERVAL:
            last[0] = now
            print(f"index: {message}", file=sys.stderr, flush=True)

    return say


def _trusted_and_pages(args: argparse.Namespace, conn: sqlite3.Connection) -> list[str]:
    """The hosts to trust; a command error when no page has text yet."""
    trusted = _trusted(args, conn)
    from geminibot.store import statements as q
    from geminibot.store.sqlite_sql import ENGINE

    pages = int(conn.execute(ENGINE.sql[q.COUNT_SEARCHABLE]).fetchone()[0])
    if not pages:
        raise CommandError(f"{args.db}: no pages with text to index yet", EXIT_NEGATIVE)
    return trusted


def run_rebuild(args: argparse.Namespace) -> int:
    if args.trust and args.trust_all:
        raise CommandError("--trust and --trust-all exclude each other")
    with open_database(args.db) as database:
        conn = database.sqlite
        if conn is None:  # authority only: PostgreSQL searches its own index
            return _authority_once(args, database)
        say = _progress(args.json)
        trusted = _trusted_and_pages(args, conn)
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
            f"indexed {counted(int(str(summary['pages'])), 'page')}; authority over "
            f"{_hosts_and_links(summary)}; {summary['index']} ({mib:.1f} MiB) "
            f"in {seconds:.1f} s"
        )
    return EXIT_OK


def _hosts_and_links(summary: dict[str, object]) -> str:
    """``12 hosts (30 links between them, trusted: 2)``, right for one of each."""
    hosts, links = int(str(summary["hosts"])), int(str(summary["host_links"]))
    between = "between them" if hosts != 1 else "to itself"
    return (
        f"{counted(hosts, 'host')} ({counted(links, 'link')} {between}, trusted: "
        f"{summary['trusted_hosts']})"
    )


def _trusted(args: argparse.Namespace, conn: Connection) -> list[str]:
    """The URLs whose hosts to trust."""
    return [] if args.trust_all else (args.trust or crawl_seeds(conn))


def run_authority(args: argparse.Namespace) -> int:
    if args.trust and args.trust_all:
        raise CommandError("--trust and --trust-all exclude each other")
    with open_database(args.db) as database:
        if args.every is None:
            return _authority_once(args, database)
        with StopSignals() as stop:
            schedule(
                lambda: scheduled_run(args, database),
                args.every,
                last_computed(database),
                stop.is_set,
                stop.wait,
                reach=lambda first: _reach(database, first),
            )
        return EXIT_OK


def _authority_once(args: argparse.Namespace, database: Database) -> int:
    summary = refresh(database, _trusted(args, database), _progress(args.json))
    if summary is None:
        raise CommandError(f"{database.name}: no pages with text to rank yet", EXIT_NEGATIVE)
    _report_authority(args, summary)
    return EXIT_OK


def scheduled_run(args: argparse.Namespace, database: Database) -> bool:
    """One run of ``index authority --every``: reported on one line, a failure too (the
    next run is at the next interval; a connection lost ends the command, with exit 1,
    for its supervisor to start it again)."""
    try:
        summary = refresh(database, _trusted(args, database), _progress(True))
    except database.errors as exc:
        _report_authority(args, {"error": terminal_safe(str(exc))})
        if database.lost:
            raise CommandError(f"{database.name}: connection lost", EXIT_NEGATIVE) from None
        database.rollback()
        return True
    if summary is None:
        _report_authority(args, {"skipped": "no pages with text yet"})
        return False
    _report_authority(args, summary)
    return True


def _reach(database: Database, first: bool) -> Reach:
    """The store's :class:`Reach`; a store that cannot be read now (locked, lost) reads
    as one not ready, not grown (the run itself reports a failure)."""
    try:
        return store_reach(database, first)
    except database.errors:
        return Reach(0, 0, 1, 1) if first else Reach(0, 0)
    finally:
        if not database.lost:
            database.rollback()


def _report_authority(args: argparse.Namespace, summary: dict[str, object]) -> None:
    if args.json:
        emit_json(summary)
    elif "error" in summary:
        print(f"authority: failed: {summary['error']}")
    elif "skipped" in summary:
        print(f"authority: skipped: {summary['skipped']}")
    else:
        print(
            f"authority of {counted(int(str(summary['pages'])), 'page')} over "
            f"{_hosts_and_links(summary)} in {summary['seconds']} s; applied to "
            f"{summary['applied_to']}"
        )
    sys.stdout.flush()


def _state(data: dict[str, Any]) -> str:
    """Whether the index is current, and if not whether an updater runs (its lock held)."""
    if data["current"]:
        return "current" + (", an updater follows the store" if data["following"] else "")
    changes = counted(data["pending"], "change")
    if data["following"]:
        return f"{changes} pending, an updater is applying them"
    left = float(data.get("index_searched_for") or 0.0)
    fts5 = f"searches use FTS5 in {human_duration(left)}" if left else "searches use FTS5"
    return f"stale ({changes} pending, no updater runs): {fts5}"


def _authority_state(data: dict[str, Any], now: float) -> str:
    """One line on link authority: when computed, and whether search applies it."""
    computed = data["computed_at"]
    if computed is None:
        return "link authority: never computed ('geminibot index authority'): text ranks alone"
    ago = human_duration(max(0.0, now - float(computed)))
    if data["current"]:
        return f"link authority: computed {ago} ago, applied to search ({counted(data['hosts'], 'host')})"
    if data["applied_at"] is None:
        return f"link authority: computed {ago} ago, not applied: search ranks by text alone"
    older = human_duration(max(0.0, now - float(data["applied_at"])))
    return f"link authority: computed {ago} ago; search applies the one of {older} ago"


def run_status(args: argparse.Namespace) -> int:
    with open_database(args.db) as database:
        conn = _sqlite_only("status", database)
        data: dict[str, Any] = status(conn)
        if data["built"] and args.verify:
            data["verify"] = verify(conn)
    if args.json:
        emit_json(data)
    elif not data["built"]:
        print(f"no search index at {data['path']}: 'geminibot search' uses FTS5")
    else:
        print(f"{data['path']}: {counted(data['pages'], 'page')}, {_state(data)}")
        print(_authority_state(data["authority"], time.time()))
        if args.verify:
            _print_verify(data["verify"])
    agree = data["current"] and (not args.verify or data["verify"]["agree"])
    return EXIT_OK if agree else EXIT_NEGATIVE


def _print_verify(check: dict[str, Any]) -> None:
    if check["agree"]:
        pages = counted(check["store_pages"], "page")
        print(f"verified: the index and the store both hold {pages}")
        return
    print(
        f"differ: the store holds {counted(check['store_pages'], 'page')}, the index "
        f"{check['index_pages']}"
    )
    for key, what in (
        ("missing", "in the store, not the index"),
        ("extra", "in the index, not the store"),
    ):
        if check[f"{key}_count"]:
            ids = ", ".join(str(i) for i in check[key])
            print(f"  {counted(check[key + '_count'], 'page')} {what} (ids {ids}...)")
    if check["duplicated"]:
        print(f"  {counted(check['duplicated'], 'document')} twice in the index")
    print("repair: 'geminibot index update --db PATH', or 'geminibot index rebuild'")


def run_update(args: argparse.Namespace) -> int:
    with open_database(args.db) as database:
        conn = _sqlite_only("update", database)
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
            f"applied {counted(int(str(summary['applied'])), 'change')}; the index holds "
            f"{counted(int(str(summary['pages'])), 'page')} "
            f"({counted(int(str(summary['pending'])), 'change')} pending) after "
            f"{summary['seconds']} s"
        )
    return EXIT_OK
