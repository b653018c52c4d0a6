"""Rows of a crawl database another process is writing (importable as ``db_rows``:
``tests/`` is on ``sys.path``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


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
