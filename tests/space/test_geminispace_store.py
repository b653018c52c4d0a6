"""A store filled as a perfect crawl would (``geminispace.store``) is one the crawl can take
over: after :func:`crawl_ready` every page's URL is done, fetched when it says and due
again a revisit interval later, as the crawl's own store sees it."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from geminispace import Space
from geminispace.store import crawl_ready, fill_store

from geminibot.crawl.continuous import next_due
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.database import open_database
from geminibot.store.db import connect
from geminibot.store.freshness import INITIAL_REVISIT

FETCHED = 1_790_000_000.0


def test_a_filled_store_is_revisited_once_due(tmp_path: Path) -> None:
    space = Space(20, 1_000)
    with closing(connect(tmp_path / "filled.db")) as conn:
        pages = fill_store(space, conn)
        assert crawl_ready(conn, FETCHED) == pages
        assert crawl_ready(conn, FETCHED) == 0  # a URL already recorded stays as it is
        assert conn.execute("SELECT DISTINCT fetched_at FROM pages").fetchall() == [(FETCHED,)]
        assert conn.execute("SELECT DISTINCT state FROM urls").fetchall() == [("done",)]
        hosts = conn.execute("SELECT count(DISTINCT host) FROM pages").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM hosts").fetchone()[0] == hosts
        with open_database(str(tmp_path / "filled.db")) as database:
            assert next_due(database, FETCHED) == FETCHED + INITIAL_REVISIT
        store = SqliteStore(conn, clock=lambda: FETCHED)
        assert store.revisit(FETCHED + INITIAL_REVISIT - 1) == 0
        assert store.revisit(FETCHED + INITIAL_REVISIT) == pages
        assert store.queued() == pages
