"""The census's SQL on either engine: an sqlite3 or a psycopg connection, ``:name``
parameters, and a few shapes of result."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Protocol


class StoreConnection(Protocol):
    """An sqlite3 or a psycopg connection, or a store's Database."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


def dbapi(conn: Any) -> Any:
    """The DBAPI connection of ``conn``: itself, or a store's
    :class:`~geminibot.store.database.Database`'s."""
    return conn if isinstance(conn, sqlite3.Connection) else getattr(conn, "connection", conn)


def execute(conn: StoreConnection, sql: str, params: dict[str, Any] | None = None) -> Any:
    """``sql`` with ``:name`` parameters run on either engine (both connections commit
    each statement: the stores open them in autocommit mode); its cursor."""
    params = params or {}
    conn = dbapi(conn)
    if not isinstance(conn, sqlite3.Connection):
        sql = sql.replace("%", "%%")  # psycopg's placeholders start with one
        for name in sorted(params, key=len, reverse=True):
            sql = sql.replace(f":{name}", f"%({name})s")
    return conn.execute(sql, params)


def run(conn: StoreConnection, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
    """``sql`` with ``:name`` parameters on either engine; all its rows."""
    return list(execute(conn, sql, params).fetchall())


def one(conn: StoreConnection, sql: str, params: dict[str, Any] | None = None) -> Any:
    rows = run(conn, sql, params)
    return rows[0][0] if rows else None


def has_table(conn: StoreConnection, name: str) -> bool:
    if isinstance(dbapi(conn), sqlite3.Connection):
        sql = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = :name"
    else:
        sql = "SELECT count(*) FROM information_schema.tables WHERE table_name = :name"
    return bool(one(conn, sql, {"name": name}))


def counted(rows: Iterable[Sequence[Any]], limit: int | None = None) -> dict[str, int | float]:
    """Rows of (label, count) as a distribution, largest first (ties by label)."""
    pairs = sorted(((str(k), int(v)) for k, v in rows), key=lambda kv: (-kv[1], kv[0]))
    return dict(pairs[:limit] if limit is not None else pairs)
