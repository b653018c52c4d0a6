"""The one SQLite file a crawl lives in: connection settings, schema, migrations by version.

Everything the crawler knows is in this file: the frontier and visited set (``urls``), the
hosts and their politeness state, the robots cache, every policy decision, every fetch, and
the index itself (``pages``, ``links`` and the FTS5 table ``pages_fts``).

Safety under ``kill -9`` comes from SQLite, not from recovery code of ours: WAL mode, short
``BEGIN IMMEDIATE`` transactions (:func:`transaction`, :func:`begin_write`) and idempotent
writes. With WAL,
``synchronous=NORMAL`` never loses a committed transaction when the *process* dies; only a
power cut may drop the last few, which the crawler's lease protocol tolerates too.

The schema is :mod:`geminibot.store.schema`'s; an older file is brought to the current
version by :func:`geminibot.store.upgrade.upgrade` when it is opened. A new (empty) file
gets what those migrations make of an empty file, as statements: a process runs the
migrations once, on a file in a temporary folder, and replays that file's schema in each
new database it creates (a test holds the two to each other).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from geminibot.store.errors import DatabaseError
from geminibot.store.upgrade import (
    SCHEMA_VERSION,
    VERSION_QUERY,
    check_version,
    database_version,
    upgrade,
)

__all__ = ["SCHEMA_VERSION", "DatabaseError", "connect", "transaction"]

#: How long a connection waits for another writer before giving up (milliseconds).
BUSY_TIMEOUT_MS = 10_000
#: Seconds between two tries for the write lock while another connection holds it
#: (:func:`begin_write`).
LOCK_RETRY = 0.001


def _null(value: None) -> None:
    """NULL, bound as NULL."""
    return value


# sqlite3 (Python 3.11) looks a parameter that is not an exact int, float or str up in its
# adapters' table and, when the table has no entry, asks the value and its protocol for an
# adapter, formatting and clearing two AttributeErrors: thousands of instructions for each
# NULL and each flag, 2% of the batched crawl store's (docs/benchmarks.md, "The one store's
# CPU per page"). With these entries they are bound as they were without: None as NULL, a
# flag (the statements both engines run take booleans) as its integer.
sqlite3.register_adapter(type(None), _null)
sqlite3.register_adapter(bool, int)


def sqlite_version(conn: sqlite3.Connection) -> int | None:
    """The schema version of an SQLite crawl database (see :mod:`geminibot.store.upgrade`):
    None for an empty file, 0 for a file of another application."""
    return database_version(
        conn,
        "SELECT name FROM sqlite_master WHERE type = 'table'",
        lambda _: int(conn.execute("PRAGMA user_version").fetchone()[0]),
    )


def connect(
    path: str | Path, *, create: bool = True, any_thread: bool = False
) -> sqlite3.Connection:
    """Open (and create or migrate) a geminibot database; raise :class:`DatabaseError`.

    The connection is in autocommit mode: writes go through :func:`transaction`.
    With ``create=False`` a missing file or one without tables is an error, and the file
    is not touched (for read-only commands: see :func:`geminibot.store.database.open_database`).
    With ``any_thread`` it may be used by one thread after another, never by two at once
    (a pool of worker threads' connections, :mod:`geminibot.store.reads`).
    """
    path = Path(path)
    if not create and not path.exists():
        raise DatabaseError(f"{path}: no such database")
    if path.is_dir():
        raise DatabaseError(f"{path}: is a folder, expected a database file")
    if not create and not os.access(path.parent, os.W_OK):
        return _connect_read_only(path, any_thread)
    try:
        conn = _open(path, any_thread)
    except sqlite3.Error as exc:
        raise DatabaseError(f"{path}: cannot open: {exc}") from None
    try:
        version = sqlite_version(conn)  # (before anything that could write the file)
        if version is None and not create:
            raise DatabaseError(f"{path}: no crawl in this database (it has no tables)")
        if version == 0:
            raise DatabaseError(f"{path}: an SQLite database, but not a geminibot one")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn, path, version)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise DatabaseError(f"{path}: not a usable geminibot database: {exc}") from None
    except DatabaseError:
        conn.close()
        raise
    return conn


def _connect_read_only(path: Path, any_thread: bool) -> sqlite3.Connection:
    """A database in a folder that cannot be written (a read-only mount, a copy on a CD):
    SQLite cannot create the WAL's shared-memory file beside it, so it is opened as an
    immutable file; nothing can write it there anyway."""
    uri = f"{path.resolve().as_uri().replace('file://', 'file:', 1)}?immutable=1"
    try:
        conn = sqlite3.connect(
            uri, uri=True, isolation_level=None, check_same_thread=not any_thread
        )
        version = sqlite_version(conn) or 0
    except sqlite3.DatabaseError as exc:
        raise DatabaseError(f"{path}: not a usable geminibot database: {exc}") from None
    if version != SCHEMA_VERSION:
        conn.close()
        raise DatabaseError(
            f"{path}: schema version {version}, this geminibot reads {SCHEMA_VERSION}; "
            "it cannot be migrated in a read-only folder"
        )
    return conn


def _migrate(conn: sqlite3.Connection, path: Path, version: int | None) -> None:
    if version == SCHEMA_VERSION:
        return
    if version is None:
        with suppress(OSError):  # (else no temporary folder: migrate the file)
            _create(conn)
            return
    check_version(str(path), version or 0)
    upgrade(lambda: _open(path), "sqlite")


@functools.cache
def new_schema() -> tuple[tuple[str, ...], str, int]:
    """The statements that give an empty file the schema the migrations give it (tables,
    then indexes, then triggers, in the order they were made; not SQLite's own tables nor
    FTS5's shadow tables, which its virtual table makes), the version they stamp and the
    ``user_version`` they set: read once per process from a file the migrations built in
    a temporary folder."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "new.db"
        upgrade(lambda: _open(path), "sqlite")
        conn = sqlite3.connect(path)
        try:
            shadow = {row[1] for row in conn.execute("PRAGMA table_list") if row[2] == "shadow"}
            rows = conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY"
                " CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 ELSE 2 END, rowid"
            ).fetchall()
            version = str(conn.execute(VERSION_QUERY).fetchone()[0])
            user_version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    statements = tuple(
        sql for name, sql in rows if name not in shadow and not name.startswith("sqlite_")
    )
    return statements, version, user_version


def _create(conn: sqlite3.Connection) -> None:
    """Give an empty file the current schema (:func:`new_schema`), in one transaction;
    nothing if another process did first."""
    statements, version, user_version = new_schema()
    with transaction(conn):
        if sqlite_version(conn) is not None:
            return
        for sql in statements:
            conn.execute(sql)
        conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (version,))
        conn.execute(f"PRAGMA user_version = {user_version}")


def _open(path: Path, any_thread: bool = False) -> sqlite3.Connection:
    """A plain connection (autocommit, waiting for other writers) to the file."""
    conn = sqlite3.connect(
        path,
        isolation_level=None,
        timeout=BUSY_TIMEOUT_MS / 1000,
        check_same_thread=not any_thread,
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def begin_write(conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``: the write lock, asked for every :data:`LOCK_RETRY` seconds while
    another connection holds it, for as long as ``conn``'s busy timeout. A running crawl
    holds the lock for batches of writes (``BATCH_SECONDS``) and takes it again as soon as
    its next write comes, milliseconds after each commit; SQLite's own wait, which backs
    off to one try every 100 ms, all but never falls in that gap, where a ``geminibot
    recheck`` or a ``/submit`` beside a busy crawl must get in."""
    (timeout_ms,) = conn.execute("PRAGMA busy_timeout").fetchone()
    deadline = time.monotonic() + timeout_ms / 1000
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
                if not busy or time.monotonic() >= deadline:
                    raise
            time.sleep(LOCK_RETRY)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One short write transaction: ``BEGIN IMMEDIATE`` (:func:`begin_write`) ... ``COMMIT``,
    rolled back on error."""
    begin_write(conn)
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def get_setting(conn: sqlite3.Connection, key: str) -> str | None:
    from geminibot.store import statements as q
    from geminibot.store.sqlite_sql import ENGINE

    row = conn.execute(ENGINE.sql[q.SETTING], {"key": key}).fetchone()
    return None if row is None else str(row[0])


def set_setting(conn: sqlite3.Connection, key: str, value: str) -> None:
    from geminibot.store import statements as q
    from geminibot.store.sqlite_sql import ENGINE

    conn.execute(ENGINE.sql[q.SET_SETTING], {"key": key, "value": value})


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy the WAL into the database and truncate it to nothing (``PRAGMA
    wal_checkpoint(TRUNCATE)``), as a crawl ends: closing the last connection does that
    too, but not while another one (``serve-search``, a ``search``) has the file open,
    which leaves the crawl's whole WAL beside it. A reader in the middle of a read makes
    it wait (up to :data:`BUSY_TIMEOUT_MS`), then give up, harmlessly."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
