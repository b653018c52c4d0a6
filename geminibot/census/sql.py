"""The census's reads: SQL text with ``:name`` parameters, run on a store's
:class:`~geminibot.store.database.Database` of either engine, and a few shapes of result."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from geminibot.store.database import Database


def run(db: Database, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
    """``sql`` on either engine; all its rows."""
    return list(db.query(sql, params).fetchall())


def one(db: Database, sql: str, params: dict[str, Any] | None = None) -> Any:
    rows = run(db, sql, params)
    return rows[0][0] if rows else None


def counted(rows: Iterable[Sequence[Any]], limit: int | None = None) -> dict[str, int | float]:
    """Rows of (label, count) as a distribution, largest first (ties by label)."""
    pairs = sorted(((str(k), int(v)) for k, v in rows), key=lambda kv: (-kv[1], kv[0]))
    return dict(pairs[:limit] if limit is not None else pairs)
