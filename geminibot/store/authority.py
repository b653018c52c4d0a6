"""The store's side of link authority (:mod:`geminibot.index.authority` ranks the hosts):
the link graph read for ranking, and each page's ``authority`` row written.

The reads (the crawl's seeds, the hosts with pages, the links between pages of
different hosts, whether and when authority was computed) are one text for both engines
and take any connection (:class:`Connection`). Writing replaces every page's row by its
host's (score, weight) from a temporary table ``host_rank``: on SQLite in transactions of
:data:`WRITE_CHUNK` pages (:func:`write_sqlite`), so that a crawl writing meanwhile waits
for one chunk at most; on PostgreSQL in one transaction (:func:`write_postgres`), as its
readers and writers never wait for it. :func:`authority_writer` gives a database's.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from geminibot.store.db import set_setting, transaction

# (the statements, and SQLAlchemy with them, are imported where written: ``search``
# reads whether and when authority was computed and starts without them)

if TYPE_CHECKING:
    from geminibot.store.database import Database
    from geminibot.store.statements import Compiled

#: The store's setting that records when authority was last computed (Unix seconds).
COMPUTED_AT = "authority_computed_at"
#: Pages whose authority SQLite writes per transaction: a crawl's write waits for one
#: chunk at most, not for the whole table, which at Geminispace scale can take longer
#: than the crawl's busy timeout (docs/benchmarks.md).
WRITE_CHUNK = 20_000


class Connection(Protocol):
    """What the reads need of a connection: an sqlite3 or a psycopg one, or a
    :class:`~geminibot.store.database.Database` (the same text runs on both)."""

    def execute(self, query: Any, /) -> Any: ...


SEEDS = "SELECT url FROM urls WHERE depth = 0"
PAGE_HOSTS = "SELECT DISTINCT host FROM pages ORDER BY host"
#: Each link of a page that is not an alias: its page's host and its target URL.
HOST_LINKS = (
    "SELECT p.host, l.target FROM links l JOIN pages p ON p.id = l.page_id"
    " WHERE p.duplicate_of IS NULL"
)
HAS_AUTHORITY = "SELECT 1 FROM authority LIMIT 1"
#: When authority was last computed (no parameter).
LAST_COMPUTED = f"SELECT value FROM settings WHERE key = '{COMPUTED_AT}'"


def crawl_seeds(conn: Connection) -> list[str]:
    """The URLs the crawl started from (depth 0 in its frontier)."""
    return [str(u) for (u,) in conn.execute(SEEDS)]


def page_hosts(conn: Connection) -> list[str]:
    """The hosts with pages, in order."""
    return [str(h) for (h,) in conn.execute(PAGE_HOSTS)]


def host_links(conn: Connection) -> Iterable[tuple[str, str]]:
    """Each link of a page that is not an alias: (its page's host, its target URL),
    read as they come."""
    return conn.execute(HOST_LINKS)  # type: ignore[no-any-return]


def has_authority(conn: Connection) -> bool:
    """Whether authority has been computed (the ``authority`` table holds rows)."""
    return conn.execute(HAS_AUTHORITY).fetchone() is not None


def last_computed(conn: Connection) -> float | None:
    """When authority was last computed into the store (Unix seconds; None: never)."""
    row = conn.execute(LAST_COMPUTED).fetchone()
    try:
        return None if row is None else float(row[0])
    except ValueError:
        return None


#: Writes each host's (score, weight) to its pages' ``authority`` rows, replacing them all.
Writer = Callable[[Any, list[tuple[str, float, float]]], None]


def authority_writer(database: Database) -> Writer:
    """The :data:`Writer` of ``database``'s engine (to call with its connection)."""
    return write_sqlite if database.sqlite is not None else write_postgres


def write_sqlite(conn: sqlite3.Connection, ranks: list[tuple[str, float, float]]) -> None:
    """The SQLite store's :data:`Writer`: every page's row replaced by its host's, in
    transactions of :data:`WRITE_CHUNK` pages, then the rows of pages gone deleted, so
    that a crawl writing meanwhile waits for one chunk at most, never for the whole table
    (SQLite has one writer at a time). A search in between reads some pages' new weights
    and others' old ones; the tantivy index's weights file is written after the last."""
    from geminibot.store import statements as q
    from geminibot.store.sqlite_sql import ENGINE

    _host_rank(conn, ranks, ENGINE.sql)
    try:
        _in_chunks(
            conn,
            "SELECT id FROM pages WHERE id > ? ORDER BY id LIMIT ?",
            "INSERT OR REPLACE INTO authority (url, score, weight)"
            " SELECT p.url, h.score, h.weight FROM pages p JOIN temp.host_rank h"
            " ON h.host = p.host WHERE p.id > ? AND p.id <= ?",
            0,
        )
        _in_chunks(
            conn,
            "SELECT url FROM authority WHERE url > ? ORDER BY url LIMIT ?",
            "DELETE FROM authority WHERE url > ? AND url <= ?"
            " AND NOT EXISTS (SELECT 1 FROM pages p WHERE p.url = authority.url)",
            "",
        )
        with transaction(conn):
            set_setting(conn, COMPUTED_AT, str(time.time()))
    finally:
        conn.execute(ENGINE.sql[q.DROP_HOST_RANK])


def _in_chunks(conn: sqlite3.Connection, keys: str, change: str, last: int | str) -> None:
    """Run ``change`` (parameters: a range of keys, low excluded) over the keys ``keys``
    lists (parameters: after this key, at most this many) from after ``last``, one
    transaction per :data:`WRITE_CHUNK` keys."""
    while True:
        with transaction(conn):
            found = conn.execute(keys, (last, WRITE_CHUNK)).fetchall()
            if not found:
                return
            conn.execute(change, (last, found[-1][0]))
        last = found[-1][0]


def _host_rank(conn: Any, ranks: list[tuple[str, float, float]], sql: Compiled) -> None:
    """The temporary table ``host_rank`` made afresh and filled with ``ranks``."""
    from geminibot.store import statements as q

    conn.execute(sql[q.DROP_HOST_RANK])
    conn.execute(sql[q.HOST_RANK_TABLE])
    rows = [{"host": host, "score": score, "weight": weight} for host, score, weight in ranks]
    conn.cursor().executemany(sql[q.ADD_HOST_RANK], rows)


def replace_authority(conn: Any, sql: Compiled) -> None:
    """Every page's authority replaced by its host's (score, weight), inside the caller's
    transaction, which holds the temporary table ``host_rank`` (host, score, weight): the
    PostgreSQL store's way (its readers and writers never wait for it); ``sql``: the
    statements compiled for ``conn``'s engine."""
    from geminibot.store import statements as q

    conn.execute(sql[q.CLEAR_AUTHORITY], {})
    conn.execute(sql[q.FILL_AUTHORITY], {})
    conn.execute(sql[q.SET_SETTING], {"key": COMPUTED_AT, "value": str(time.time())})


def write_postgres(conn: Any, ranks: list[tuple[str, float, float]]) -> None:
    """The PostgreSQL store's :data:`Writer`: every page's authority replaced in one
    transaction (searches see the old scores or the new)."""
    from geminibot.store import statements as q
    from geminibot.store.pg_sql import ENGINE

    with conn.transaction():
        _host_rank(conn, ranks, ENGINE.sql)
        replace_authority(conn, ENGINE.sql)
        conn.execute(ENGINE.sql[q.DROP_HOST_RANK])
