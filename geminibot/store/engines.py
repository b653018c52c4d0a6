"""Which engine a crawl database connection speaks: the one place that tells an sqlite3
connection from a psycopg one, for the code that reads either (statistics, the search
capsule, the commands)."""

from __future__ import annotations

import sqlite3
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
