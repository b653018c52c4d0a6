"""``geminibot db migrate --from crawl.db --to postgresql://...``: move a crawl.

Everything moves, table by table with ``COPY``, in one PostgreSQL transaction (so a
failed move leaves the target as it was): settings, hosts and their politeness state,
the frontier (states, leases left by a killed run go back to ``queued``), policy-file
cache, decisions, the request log, pages with their links, and the full-text index
(the SQLite FTS5 columns; PostgreSQL computes the ``tsvector``). Row ids are kept, so the
queue order and every reference stay as they were. The target must hold no crawl yet.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from typing import Any

from geminibot.cliutil import EXIT_OK, CommandError, emit_json
from geminibot.store.database import open_database
from geminibot.store.pg import is_postgres

#: Rows copied between two progress lines.
PROGRESS_ROWS = 50_000

# (table, SQLite SELECT, PostgreSQL columns); booleans converted where SQLite keeps 0/1.
_TABLES: tuple[tuple[str, str, str], ...] = (
    ("settings", "SELECT key, value FROM settings", "key, value"),
    (
        "hosts",
        "SELECT host, first_seen, last_fetch_at, last_duration, slow_downs, not_before,"
        " urls_total, skipped_reason, deep_urls, failures, failing_since FROM hosts",
        "host, first_seen, last_fetch_at, last_duration, slow_downs, not_before,"
        " urls_total, skipped_reason, deep_urls, failures, failing_since",
    ),
    (
        "urls",
        "SELECT id, url, host, path, has_query != 0, depth, parent,"
        " CASE state WHEN 'leased' THEN 'queued' ELSE state END, reason, NULL, updated_at,"
        " attempts, next_visit, revisit_interval, misses, missing_since FROM urls ORDER BY id",
        "id, url, host, path, has_query, depth, parent, state, reason, lease, updated_at, attempts,"
        " next_visit, revisit_interval, misses, missing_since",
    ),
    (
        "robots",
        "SELECT host, name, fetched_at, expires_at, outcome, reason, status, body FROM robots",
        "host, name, fetched_at, expires_at, outcome, reason, status, body",
    ),
    (
        "decisions",
        "SELECT id, url, host, allowed != 0, reason, at FROM decisions ORDER BY id",
        "id, url, host, allowed, reason, at",
    ),
    (
        "fetches",
        "SELECT id, url, host, status, meta, error, started_at, duration FROM fetches ORDER BY id",
        "id, url, host, status, meta, error, started_at, duration",
    ),
    (
        "pages",
        "SELECT p.id, p.url, p.host, p.status, p.meta, p.mime, p.lang, p.size,"
        " p.content_hash, p.fetched_at, p.title, p.duplicate_of, p.redirect_to,"
        " p.text_indexed != 0, p.changed_at, p.gone_at, p.charset_ok != 0, f.headings,"
        " f.body FROM pages p LEFT JOIN pages_fts f ON f.rowid = p.id ORDER BY p.id",
        "id, url, host, status, meta, mime, lang, size, content_hash, fetched_at, title,"
        " duplicate_of, redirect_to, text_indexed, changed_at, gone_at, charset_ok, headings,"
        " body",
    ),
    (
        "tls_history",
        "SELECT host, sha256, tls_version, cipher, first_seen, last_seen, spki_sha256,"
        " subject, issuer, sans, trust, key_type, key_bits, not_before, not_after,"
        " name_matches != 0, parsed != 0 FROM tls_history",
        "host, sha256, tls_version, cipher, first_seen, last_seen, spki_sha256, subject,"
        " issuer, sans, trust, key_type, key_bits, not_before, not_after, name_matches, parsed",
    ),
    (
        "censuses",
        "SELECT id, taken_at, figures FROM censuses ORDER BY id",
        "id, taken_at, figures",
    ),
    (
        "pins",
        "SELECT host, port, fingerprint, first_seen FROM pins",
        "host, port, fingerprint, first_seen",
    ),
    (
        "links",
        "SELECT page_id, position, target, label FROM links ORDER BY page_id, position",
        "page_id, position, target, label",
    ),
)
_IDENTITIES = ("urls", "decisions", "fetches", "pages", "censuses")


def register(commands: Any) -> None:
    db = commands.add_parser("db", help="crawl databases: move a crawl to PostgreSQL")
    sub = db.add_subparsers(title="commands", metavar="COMMAND")
    move = sub.add_parser(
        "migrate",
        help="move a crawl from an SQLite file to PostgreSQL",
        description="Copy a whole crawl (frontier, host state, policy-file cache, "
        "decisions, requests, index) from an SQLite crawl database into an empty "
        "PostgreSQL database, in one transaction. The SQLite file is only read.",
    )
    move.add_argument("--from", dest="source", required=True, metavar="PATH", help="SQLite file")
    move.add_argument(
        "--to", dest="target", required=True, metavar="URL", help="postgresql://USER@HOST/DB"
    )
    move.add_argument("--json", action="store_true", help="what moved, as one JSON object")
    move.set_defaults(run=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    if is_postgres(args.source):
        raise CommandError("--from is an SQLite crawl database (a file)")
    if not is_postgres(args.target):
        raise CommandError("--to is a PostgreSQL database (postgresql://USER@HOST/DB)")
    with open_database(args.source) as source:
        moved = migrate(source.connection, args.target)
    if args.json:
        emit_json(moved)
    else:
        counts = ", ".join(f"{n} {table}" for table, n in moved.items())
        print(f"moved {counts}")
    return EXIT_OK


def migrate(source: sqlite3.Connection, target: str) -> dict[str, int]:
    """Copy every table of ``source`` into the empty crawl database ``target``."""
    import psycopg

    from geminibot.store import pg

    conn = pg.connect(target)
    name = pg.display(target)
    moved: dict[str, int] = {}
    try:
        with conn.transaction():
            row = conn.execute(
                "SELECT (SELECT count(*) FROM urls) + (SELECT count(*) FROM pages)"
                " + (SELECT count(*) FROM settings)"
            ).fetchone()
            if row and row[0]:
                raise CommandError(f"{name}: already holds a crawl; migrate into an empty one")
            for table, select, columns in _TABLES:
                n = 0
                with conn.cursor().copy(f"COPY {table} ({columns}) FROM STDIN".encode()) as copy:
                    for values in source.execute(select):
                        copy.write_row(values)
                        n += 1
                        if n % PROGRESS_ROWS == 0:
                            print(f"db migrate: {table}: {n} rows", file=sys.stderr, flush=True)
                moved[table] = n
            for table in _IDENTITIES:
                conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                    f" coalesce((SELECT max(id) FROM {table}), 0) + 1, false)".encode()
                )
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        raise CommandError(f"{name}: migration failed, nothing moved: {reason}", 1) from None
    finally:
        conn.close()
    return moved
