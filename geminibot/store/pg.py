"""The crawl database on PostgreSQL: connection, schema by version, pages.

The same tables as the SQLite file (:mod:`geminibot.store.db`), in PostgreSQL's types, plus
what several crawl processes sharing one database need: ``host_leases`` (which process
holds which host, until when). The full-text index is a ``tsvector`` column of ``pages``
(title weight A, headings B, URL C, body D; the ``simple`` configuration, language
neutral like FTS5's ``unicode61``) with a GIN index, searched by
:mod:`geminibot.index.pg_search`.

The schema is :mod:`geminibot.store.schema`'s, created and upgraded by
:mod:`geminibot.store.upgrade` (one history for both engines) when a connection opens; a
database of a newer version is refused with one line.

psycopg 3 is imported only here (and by the crawl's PostgreSQL store): the ``postgres``
extra. A connection string is any libpq URI, ``postgresql://USER@HOST:PORT/DB``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from geminibot.store.errors import DatabaseError
from geminibot.store.pages import (
    FILE_LABELS,
    MAX_FILE_LABELS,
    Page,
    indexed_text,
    is_file,
    page_row,
    with_labels,
)
from geminibot.store.upgrade import (
    PG_LEGACY_VERSIONS,
    SCHEMA_VERSION,
    VERSION_QUERY,
    check_version,
    upgrade,
    version_of,
)

if TYPE_CHECKING:
    import psycopg

#: Seconds a connection attempt may take before the database counts as unreachable.
CONNECT_TIMEOUT = 10

_URL_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(db: str) -> bool:
    """Whether a ``--db`` value names a PostgreSQL database (a libpq URI)."""
    return db.startswith(_URL_SCHEMES)


def display(conninfo: str) -> str:
    """The connection string without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", conninfo)


def connect(conninfo: str, *, create: bool = True) -> psycopg.Connection[Any]:
    """Open one connection, upgrade the schema, and create it in an empty database unless
    ``create`` is false; raise :class:`DatabaseError` (a malformed string, a server
    unreachable or refusing us, an empty database not to create, a newer schema, not a
    geminibot database)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = display(conninfo)
    try:
        conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        reason = " ".join(str(exc).split())
        raise DatabaseError(f"{name}: not a valid PostgreSQL connection string: {reason}") from None
    try:
        conn = psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT, autocommit=True)
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        raise DatabaseError(f"{name}: cannot connect: {reason}") from None
    try:
        migrate(conn, conninfo, create=create)
    except BaseException:
        conn.close()
        raise
    return conn


def schema_version(conn: psycopg.Connection[Any]) -> int | None:
    """The database's schema version (see :mod:`geminibot.store.upgrade`); None for an
    empty database, 0 for one of another application."""
    row = conn.execute(
        "SELECT to_regclass('alembic_version') IS NOT NULL,"
        " to_regclass('geminibot_schema') IS NOT NULL,"
        " (SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())"
    ).fetchone()
    assert row is not None
    if row[0]:
        stored = conn.execute(VERSION_QUERY).fetchone()
        return version_of(str(stored[0])) if stored else 0
    if row[1]:
        legacy = conn.execute("SELECT version FROM geminibot_schema").fetchone()
        return PG_LEGACY_VERSIONS.get(legacy[0], legacy[0]) if legacy else 0
    return 0 if row[2] else None


def migrate(conn: psycopg.Connection[Any], conninfo: str, *, create: bool = True) -> None:
    """Create the schema (with ``create``), or upgrade it in place, or refuse a newer one
    or a foreign database."""
    import psycopg

    name = display(conninfo)
    version = schema_version(conn)
    if version == SCHEMA_VERSION:
        return
    if version is None and not create:
        raise DatabaseError(f"{name}: no crawl in this database (it has no tables)")
    if version == 0:
        raise DatabaseError(f"{name}: this database has tables but is not a geminibot database")
    check_version(name, version or 0)
    try:
        upgrade(lambda: psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT), "postgresql")
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        raise DatabaseError(f"{name}: cannot set up the schema: {reason}") from None


# --- pages ---


def store_page(cur: psycopg.Cursor[Any], page: Page, role: str) -> int:
    """Insert or replace ``page`` (links and text as :func:`geminibot.store.pages.store_page`);
    return its row id. Call inside a transaction."""
    if is_file(page):
        cur.execute(FILE_LABELS.format(mark="%s"), (page.url, MAX_FILE_LABELS))
        page = with_labels(page, [r[0] for r in cur.fetchall()])
    row = page_row(page, role)
    keep_text = bool(row["keep"])
    cur.execute("DELETE FROM pages WHERE url = %s", (page.url,))
    headings = indexed_text("\n".join(page.headings)) if keep_text else None
    cur.execute(
        "INSERT INTO pages (url, host, status, meta, mime, lang, size, content_hash,"
        " fetched_at, title, duplicate_of, redirect_to, text_indexed, changed_at, gone_at,"
        " charset_ok, headings, body)"
        " VALUES (%(url)s, %(host)s, %(status)s, %(meta)s, %(mime)s, %(lang)s, %(size)s,"
        " %(hash)s, %(at)s, %(title)s, %(dup)s, %(redirect)s, %(keep)s, %(changed)s,"
        " %(gone)s, %(charset_ok)s, %(headings)s, %(body)s) RETURNING id",
        {**row, "headings": headings, "body": indexed_text(page.text or "") if keep_text else None},
    )
    added = cur.fetchone()
    assert added is not None
    page_id = int(added[0])
    if page.links:
        cur.execute(
            "INSERT INTO links (page_id, position, target, label)"
            " SELECT %s, n - 1, t, l FROM unnest(%s::text[], %s::text[])"
            " WITH ORDINALITY AS x (t, l, n)",
            (
                page_id,
                [link.target for link in page.links],
                [link.label if keep_text else "" for link in page.links],
            ),
        )
    return page_id
