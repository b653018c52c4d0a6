"""What the store tests share: a settable clock, tight trap bounds, a raw connection."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from geminibot.store import pg as pg_schema
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.db import connect
from geminibot.store.traps import FrontierLimits


class Clock:
    """A settable clock for the store (the crawl's wall-clock seconds)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


LIMITS = FrontierLimits(max_depth=3, max_url_length=60, max_queries_per_path=2, max_urls_per_host=6)


@contextmanager
def opened(kind: str, db: str) -> Iterator[tuple[Any, str]]:
    """A connection to a new crawl database of ``kind`` (autocommit), and its placeholder,
    for tests that write rows with SQL both engines run."""
    if kind == "sqlite":
        conn = connect(db)
        try:
            yield conn, "?"
        finally:
            conn.close()
        return
    pg_schema.connect(db).close()  # creates the schema
    with psycopg.connect(db, autocommit=True) as pg_conn:
        yield pg_conn, "%s"


def database(kind: str, request: Any, tmp_path: Path, postgresql: str) -> str:
    """What ``--db`` would say: a file path (no file yet), or the URL of the database the
    fixture named ``postgresql`` makes."""
    if kind == "sqlite":
        return str(tmp_path / "crawl.db")
    return str(request.getfixturevalue(postgresql))


class Frontier(SqliteStore):
    """An SQLite store whose :meth:`add` puts one URL in the frontier as a page's link
    enters it, in the caller's transaction (``transaction(conn)``)."""

    def add(self, url: str, depth: int) -> str:
        """``"queued"``, ``"known"`` or ``"trapped: <bound>"``."""
        added = self.frontier.add(self.engine.conn, [(url, depth, None)])
        (what,) = added.values()
        return what

    def finish(self, url: str, state: str) -> None:
        """Close a leased URL, in the caller's transaction."""
        self._finish(self.engine.conn, url, state)
