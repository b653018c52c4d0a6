"""``geminibot db migrate``: a crawl moves from SQLite to PostgreSQL whole, and goes on there."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from db_rows import reading
from store_helpers import LIMITS, Clock
from test_store import A, B
from test_store_search import fill

from geminibot.cli import main
from geminibot.index import stats
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.database import open_database
from geminibot.store.db import connect
from geminibot.store.pgstore import PgStore


def sqlite_crawl(path: Path, clock: Clock) -> None:
    conn = connect(path)
    store = SqliteStore(conn, clock, LIMITS)
    assert store.check_settings({"role": "indexer", "agent": "geminibot"}) is None
    fill(store)
    store.seed([B, B + "q?1"])
    assert store.claim("b.test", "killed") is not None  # left leased by a killed run
    conn.close()


def test_migrate_moves_everything(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = Clock()
    db = tmp_path / "crawl.db"
    sqlite_crawl(db, clock)
    times = "SELECT url, changed_at, gone_at FROM pages ORDER BY url"
    with connect(db) as conn:
        conn.execute("UPDATE pages SET changed_at = 5.0, gone_at = 6.0 WHERE url = ?", (A,))
        kept = conn.execute(times).fetchall()
    conn.close()
    assert main(["db", "migrate", "--from", str(db), "--to", pg_url]) == 0
    assert capsys.readouterr().out.startswith("moved 2 settings, 2 hosts, 6 urls")
    with psycopg.connect(pg_url) as pconn:
        assert [tuple(r) for r in pconn.execute(times).fetchall()] == kept
    with open_database(str(db)) as lite_db, open_database(pg_url) as pg_db:
        before, after = stats(lite_db), stats(pg_db)
    with reading(str(db)) as (lite, lite_search), reading(pg_url) as (pgc, pg_search):
        assert before["frontier"] == {"done": 4, "leased": 1, "queued": 1}
        assert after["frontier"] == {"done": 4, "queued": 2}  # the killed run's lease is back
        for key in ("hosts", "pages", "pages_with_text", "links", "requests", "status", "mime"):
            assert before[key] == after[key], key
        for query in ("crawler", "tomatoes", '"polite crawler"'):
            assert [r.url for r in lite_search(lite, query, 10)] == [
                r.url for r in pg_search(pgc, query, 10)
            ]
    store = PgStore(pg_url, clock, LIMITS)
    try:  # the crawl goes on: the queue in its order, new rows after the old ones
        assert list(store.hosts_with_work()) == ["b.test"]
        assert store.lease_host("b.test", "next") is not None
        claim = store.claim("b.test", "next")
        assert claim is not None and claim.url == B
        assert store.seed([A + "new"]) == {A + "new": "queued"}
    finally:
        store.close()


def test_migrate_refuses_a_target_with_a_crawl(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "crawl.db"
    sqlite_crawl(db, Clock())
    assert main(["db", "migrate", "--from", str(db), "--to", pg_url]) == 0
    capsys.readouterr()
    assert main(["db", "migrate", "--from", str(db), "--to", pg_url]) == 2
    assert "already holds a crawl" in capsys.readouterr().err
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pages").fetchone() == (4,)


def test_migrate_bad_arguments(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "migrate", "--from", str(tmp_path / "none.db"), "--to", pg_url]) == 2
    assert "no such database" in capsys.readouterr().err
    assert main(["db", "migrate", "--from", pg_url, "--to", pg_url]) == 2
    assert main(["db", "migrate", "--from", "x.db", "--to", str(tmp_path / "y.db")]) == 2
