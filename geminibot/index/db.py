"""The one SQLite file a crawl lives in: connection settings, schema, migrations by version.

Everything the crawler knows is in this file: the frontier and visited set (``urls``), the
hosts and their politeness state, the robots cache, every policy decision, every fetch, and
the index itself (``pages``, ``links`` and the FTS5 table ``pages_fts``).

Safety under ``kill -9`` comes from SQLite, not from recovery code of ours: WAL mode, short
``BEGIN IMMEDIATE`` transactions (:func:`transaction`) and idempotent writes. With WAL,
``synchronous=NORMAL`` never loses a committed transaction when the *process* dies; only a
power cut may drop the last few, which the crawler's lease protocol tolerates too.

The schema version is ``PRAGMA user_version``. :data:`MIGRATIONS` is append-only: version N
is the list of statements that take a database from N-1 to N, applied in one transaction.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: How long a connection waits for another writer before giving up (milliseconds).
BUSY_TIMEOUT_MS = 10_000

_V1 = (
    # Crawl settings that a resumed run must agree with (role, agent).
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # Hosts ("host" or "host:port" when the port is not 1965) and their politeness state.
    """CREATE TABLE hosts (
        host TEXT PRIMARY KEY,
        first_seen REAL NOT NULL,
        last_fetch_at REAL,
        last_duration REAL,
        slow_downs INTEGER NOT NULL DEFAULT 0,
        not_before REAL NOT NULL DEFAULT 0,
        urls_total INTEGER NOT NULL DEFAULT 0,
        skipped_reason TEXT
    )""",
    # Frontier and visited set: one row per normalised URL ever seen.
    # state: queued -> leased -> done | refused | failed ; or trapped/skipped at enqueue.
    """CREATE TABLE urls (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL UNIQUE,
        host TEXT NOT NULL,
        path TEXT NOT NULL,
        has_query INTEGER NOT NULL,
        depth INTEGER NOT NULL,
        parent TEXT,
        state TEXT NOT NULL,
        reason TEXT,
        lease TEXT,
        updated_at REAL NOT NULL
    )""",
    "CREATE INDEX urls_host_state ON urls (host, state, id)",
    "CREATE INDEX urls_state ON urls (state)",
    "CREATE INDEX urls_host_path ON urls (host, path, has_query)",
    # Policy files per host (robots.txt, robots2.txt, agents.txt) and how their fetch went.
    """CREATE TABLE robots (
        host TEXT NOT NULL,
        name TEXT NOT NULL,
        fetched_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        outcome TEXT NOT NULL,
        reason TEXT NOT NULL,
        status INTEGER,
        body BLOB,
        PRIMARY KEY (host, name)
    )""",
    # Every policy decision taken about a URL (allowed or refused) and why.
    """CREATE TABLE decisions (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL,
        host TEXT NOT NULL,
        allowed INTEGER NOT NULL,
        reason TEXT NOT NULL,
        at REAL NOT NULL
    )""",
    "CREATE INDEX decisions_url ON decisions (url)",
    # Every request sent: the crawl's own access log.
    """CREATE TABLE fetches (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL,
        host TEXT NOT NULL,
        status INTEGER,
        meta TEXT NOT NULL DEFAULT '',
        error TEXT,
        started_at REAL NOT NULL,
        duration REAL NOT NULL
    )""",
    # The index: one row per fetched URL (including redirects and failures).
    """CREATE TABLE pages (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL UNIQUE,
        host TEXT NOT NULL,
        status INTEGER NOT NULL,
        meta TEXT NOT NULL,
        mime TEXT,
        lang TEXT,
        size INTEGER NOT NULL,
        content_hash TEXT,
        fetched_at REAL NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        duplicate_of TEXT,
        redirect_to TEXT,
        text_indexed INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX pages_hash ON pages (content_hash)",
    "CREATE INDEX pages_host ON pages (host)",
    """CREATE TABLE links (
        page_id INTEGER NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        target TEXT NOT NULL,
        label TEXT NOT NULL,
        PRIMARY KEY (page_id, position)
    )""",
    """CREATE VIRTUAL TABLE pages_fts USING fts5 (
        title, headings, body, url, tokenize = 'unicode61 remove_diacritics 2'
    )""",
)

_V2 = (
    # Attempts at a URL cut short (see geminibot.crawl.frontier, MAX_URL_ATTEMPTS).
    "ALTER TABLE urls ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
    # Certificate pins (trust on first use) per Gemini host and port, kept between runs.
    """CREATE TABLE pins (
        host TEXT NOT NULL,
        port INTEGER NOT NULL,
        fingerprint TEXT NOT NULL,
        first_seen REAL NOT NULL,
        PRIMARY KEY (host, port)
    )""",
)

# Freshness (docs/crawl.md): when each finished URL is due again and its learned revisit
# interval; a URL that answered 51/52 becomes "gone". ``attempts`` (version 2) now also
# counts failed requests in a row: an answer sets it back to 0. Rows of an older database
# are due one day after their last change (a failure: one hour; one given up: never).
_V3 = (
    "ALTER TABLE urls ADD COLUMN next_visit REAL",
    "ALTER TABLE urls ADD COLUMN revisit_interval REAL",
    "UPDATE urls SET next_visit = updated_at + 86400, attempts = 0"
    " WHERE state IN ('done', 'refused')",
    "UPDATE urls SET next_visit = updated_at + 3600, attempts = max(attempts, 1)"
    " WHERE state = 'failed' AND coalesce(reason, '') NOT LIKE 'given up:%'",
    "CREATE INDEX urls_next_visit ON urls (next_visit) WHERE next_visit IS NOT NULL",
    "CREATE INDEX pages_duplicate_of ON pages (duplicate_of) WHERE duplicate_of IS NOT NULL",
    "CREATE INDEX fetches_started ON fetches (started_at)",
    "CREATE INDEX decisions_at ON decisions (at)",
)

# Per host: its deep URLs (the trap bound of geminibot.crawl.traps; NULL: not counted yet,
# counted from its rows when first needed) and its requests failed in a row since its last
# answer, with the first one's time (vanished hosts: geminibot.crawl.freshness).
_V4 = (
    "ALTER TABLE hosts ADD COLUMN deep_urls INTEGER",
    "ALTER TABLE hosts ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE hosts ADD COLUMN failing_since REAL",
)

# Fewer index writes per URL and per page (docs/benchmarks.md, "Fewer index writes"): no
# query reads ``decisions`` by URL, and only URLs with a query string are counted per path
# (geminibot.crawl.frontier; a host's paths are read through ``urls_host_state``).
_V5 = (
    "DROP INDEX decisions_url",
    "DROP INDEX urls_host_path",
    "CREATE INDEX urls_query_path ON urls (host, path) WHERE has_query = 1",
)

# The searchable set's change log, for the derived search index that follows the store
# (geminibot.index.updater): a page's id each time it enters or leaves the searchable text
# (``text_indexed``): written, replaced, delisted, deleted. Its sequence never reuses a
# number (AUTOINCREMENT), so the index records the last one it applied; the index's
# updater deletes the rows it has applied.
_V6 = (
    "CREATE TABLE index_changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, page_id INTEGER NOT NULL)",
    "CREATE TRIGGER pages_text_added AFTER INSERT ON pages WHEN new.text_indexed"
    " BEGIN INSERT INTO index_changes (page_id) VALUES (new.id); END",
    "CREATE TRIGGER pages_text_removed AFTER DELETE ON pages WHEN old.text_indexed"
    " BEGIN INSERT INTO index_changes (page_id) VALUES (old.id); END",
    "CREATE TRIGGER pages_text_changed AFTER UPDATE OF text_indexed, title ON pages"
    " WHEN old.text_indexed OR new.text_indexed"
    " BEGIN INSERT INTO index_changes (page_id) VALUES (new.id); END",
)

#: Append-only: MIGRATIONS[n - 1] takes a database from version n - 1 to n.
MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6)
SCHEMA_VERSION = len(MIGRATIONS)


class DatabaseError(Exception):
    """The database file cannot be used (not SQLite, from a newer geminibot, unreadable)."""


def connect(path: str | Path, *, create: bool = True) -> sqlite3.Connection:
    """Open (and create or migrate) a geminibot database; raise :class:`DatabaseError`.

    The connection is in autocommit mode: writes go through :func:`transaction`.
    With ``create=False`` a missing file is an error (for read-only commands).
    """
    path = Path(path)
    if not create and not path.exists():
        raise DatabaseError(f"{path}: no such database")
    if path.is_dir():
        raise DatabaseError(f"{path}: is a folder, expected a database file")
    if not create and not os.access(path.parent, os.W_OK):
        return _connect_read_only(path)
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise DatabaseError(f"{path}: cannot open: {exc}") from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn, path)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise DatabaseError(f"{path}: not a usable geminibot database: {exc}") from None
    except DatabaseError:
        conn.close()
        raise
    return conn


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A database in a folder that cannot be written (a read-only mount, a copy on a CD):
    SQLite cannot create the WAL's shared-memory file beside it, so it is opened as an
    immutable file; nothing can write it there anyway."""
    uri = f"{path.resolve().as_uri().replace('file://', 'file:', 1)}?immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise DatabaseError(f"{path}: not a usable geminibot database: {exc}") from None
    if version != SCHEMA_VERSION:
        conn.close()
        raise DatabaseError(
            f"{path}: schema version {version}, this geminibot reads {SCHEMA_VERSION}; "
            "it cannot be migrated in a read-only folder"
        )
    return conn


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise DatabaseError(
            f"{path}: database schema version {version} is newer than this geminibot "
            f"understands ({SCHEMA_VERSION})"
        )
    if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise DatabaseError(f"{path}: an SQLite database, but not a geminibot one")
    for target in range(version + 1, SCHEMA_VERSION + 1):
        with transaction(conn):
            for statement in MIGRATIONS[target - 1]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target}")


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One short write transaction: ``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def get_setting(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


#: Set a setting (replacing its value), ``{0}`` standing for the engine's placeholder.
SET_SETTING = (
    "INSERT INTO settings (key, value) VALUES ({0}, {0}) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


def set_setting(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(SET_SETTING.format("?"), (key, value))


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy the WAL into the database and truncate it to nothing (``PRAGMA
    wal_checkpoint(TRUNCATE)``), as a crawl ends: closing the last connection does that
    too, but not while another one (``serve-search``, a ``search``) has the file open,
    which leaves the crawl's whole WAL beside it. A reader in the middle of a read makes
    it wait (up to :data:`BUSY_TIMEOUT_MS`), then give up, harmlessly."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
