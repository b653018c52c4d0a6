"""Rows of a crawl database another process is writing, and a crawl database opened to
read (importable as ``db_rows``: ``tests/`` is on ``sys.path``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from geminibot.index.search import SearchResult
from geminibot.index.search_cli import search_function
from geminibot.store.database import open_database


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    """The rows ``sql`` selects from the SQLite file ``db``; none while its tables are not
    created yet."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []
    finally:
        conn.close()


@contextmanager
def reading(db: str) -> Iterator[tuple[Any, Callable[..., list[SearchResult]]]]:
    """The crawl database ``db`` (either engine) opened to read: its DBAPI connection and
    its engine's search (called with that connection)."""
    with open_database(db) as database:
        yield database.connection, search_function(database)
