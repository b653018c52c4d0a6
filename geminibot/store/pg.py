"""The crawl database on PostgreSQL: connection and schema by version.

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
from geminibot.store.upgrade import (
    PG_LEGACY_VERSIONS,
    SCHEMA_VERSION,
    check_version,
    database_version,
    upgrade,
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

    def legacy(tables: set[str]) -> int:
        if "geminibot_schema" not in tables:
            return 0
        row = conn.execute("SELECT version FROM geminibot_schema").fetchone()
        return PG_LEGACY_VERSIONS.get(row[0], row[0]) if row else 0

    tables = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
    return database_version(conn, tables, legacy)


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
