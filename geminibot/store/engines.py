"""Which engine a crawl database connection speaks: the one place that tells an sqlite3
connection from a psycopg one, for the code that reads or writes either (statistics, the
search capsule, the commands)."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import Any

from geminibot.store.statements import Engine


def engine_of(conn: Any) -> Engine:
    """The :class:`~geminibot.store.statements.Engine` of a DBAPI connection to a crawl
    database (sqlite3's, or else psycopg's)."""
    if isinstance(conn, sqlite3.Connection):
        from geminibot.store.sqlite_sql import ENGINE
    else:
        from geminibot.store.pg_sql import ENGINE
    return ENGINE


def write_transaction(conn: Any) -> AbstractContextManager[Any]:
    """One write transaction on a DBAPI connection to a crawl database (sqlite3's in
    autocommit mode: ``BEGIN IMMEDIATE``; psycopg's: ``conn.transaction()``), committed
    when the block ends, rolled back on an error."""
    if isinstance(conn, sqlite3.Connection):
        from geminibot.store.db import transaction

        return transaction(conn)
    return conn.transaction()  # type: ignore[no-any-return]
