"""The SQLite store's batched commits (``SqliteStore(batch=True)``, as the crawl loop opens
it): what another connection sees (what a ``kill -9`` would leave) at each bound's edge."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import Clock
from test_store import decision, fetch, page

from geminibot.store.crawlstore import (
    BATCH_SECONDS,
    BATCH_URLS,
    CACHE_KIB,
    CHECKPOINT_PAGES,
    FetchedPage,
    SqliteStore,
)
from geminibot.store.db import connect

HOST = "a.test"


class Monotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "crawl.db"


@pytest.fixture
def monotonic() -> Monotonic:
    return Monotonic()


@pytest.fixture
def store(db: Path, monotonic: Monotonic) -> Iterator[SqliteStore]:
    conn = connect(db)
    store = SqliteStore(conn, Clock(), batch=True, monotonic=monotonic)
    store.recover()  # a new database: no run before it, so not careful
    yield store
    conn.close()


def committed(db: Path, sql: str) -> object:
    """What another connection (or the next run after a kill) sees."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def url(i: int) -> str:
    return f"gemini://{HOST}/{i}"


def fetch_one(store: SqliteStore) -> str:
    claimed = store.claim(HOST, "me")
    assert claimed is not None
    u = claimed.url
    store.fetched(FetchedPage(decision(u), fetch(u), page(u, "t", "body"), "indexer", []))
    return u


def test_a_batch_commits_at_batch_urls(store: SqliteStore, db: Path) -> None:
    store.seed([url(i) for i in range(BATCH_URLS + 1)])  # committed at once
    assert committed(db, "SELECT count(*) FROM urls") == BATCH_URLS + 1
    for _ in range(BATCH_URLS - 1):
        fetch_one(store)
    assert store.count_pages() == BATCH_URLS - 1  # the store's own reads see its batch
    assert committed(db, "SELECT count(*) FROM pages") == 0
    fetch_one(store)
    assert committed(db, "SELECT count(*) FROM pages") == BATCH_URLS
    fetch_one(store)  # a new batch
    assert committed(db, "SELECT count(*) FROM pages") == BATCH_URLS
    store.engine.flush()
    assert committed(db, "SELECT count(*) FROM pages") == BATCH_URLS + 1


def test_a_batch_commits_at_batch_seconds(
    store: SqliteStore, db: Path, monotonic: Monotonic
) -> None:
    store.seed([url(i) for i in range(3)])
    fetch_one(store)
    monotonic.now += BATCH_SECONDS - 0.001
    store.hold_host(HOST, "me", None)
    fetch_one(store)
    assert committed(db, "SELECT count(*) FROM pages") == 0
    monotonic.now += 0.001  # the batch's first write is BATCH_SECONDS old: the next call
    store.hold_host(HOST, "me", None)
    assert committed(db, "SELECT count(*) FROM pages") == 2
    fetch_one(store)  # a new batch, timed from its own first write
    monotonic.now += BATCH_SECONDS - 0.001
    store.log_fetch(fetch(url(2)))
    assert committed(db, "SELECT count(*) FROM pages") == 2
    monotonic.now += 0.001
    store.log_fetch(fetch(url(2)))
    assert committed(db, "SELECT count(*) FROM pages") == 3


def test_careful_mode_only_after_a_run_that_did_not_end(db: Path) -> None:
    """A batched store is careful (each write committed when it ends) until recover()
    finds the run before it ended; then a claim waits for its batch, as the pages do."""
    conn = connect(db)
    store = SqliteStore(conn, Clock(), batch=True)
    store.seed([url(i) for i in range(3)])
    store.recover()  # a new database: no run before it
    assert not store.engine.careful
    claimed = store.claim(HOST, "me")
    assert claimed is not None
    store.hold_host(HOST, "me", claimed.url)
    state = f"SELECT state FROM urls WHERE url = '{claimed.url}'"
    assert committed(db, state) == "queued"
    conn.close()  # killed: run_open stays "1", the claim is lost
    conn = connect(db)
    store = SqliteStore(conn, Clock(), batch=True)
    assert store.recover() == 0
    assert store.engine.careful
    claimed = store.claim(HOST, "me")  # committed when it ends: its attempt counts
    assert claimed is not None
    assert committed(db, state) == "leased"
    fetch_one(store)
    assert committed(db, "SELECT count(*) FROM pages") == 1
    store.end_run()
    assert committed(db, "SELECT value FROM settings WHERE key = 'run_open'") == "0"
    conn.close()
    conn = connect(db)
    store = SqliteStore(conn, Clock(), batch=True)
    assert store.recover() == 1  # left leased (by an older geminibot, say): careful
    assert store.engine.careful
    conn.close()


def test_a_kill_repeats_the_open_batch_only(db: Path, monotonic: Monotonic) -> None:
    conn = connect(db)
    store = SqliteStore(conn, Clock(), batch=True, monotonic=monotonic)
    store.seed([url(i) for i in range(4)])
    store.recover()
    first = fetch_one(store)
    store.engine.flush()
    fetch_one(store)
    claimed = store.claim(HOST, "me")
    assert claimed is not None
    conn.close()  # killed: the open batch never committed
    conn = connect(db)
    again = SqliteStore(conn, Clock())
    assert again.recover() == 0  # its claims went back with it: nothing left leased
    assert again.count_pages() == 1 and again.previous(first) is not None
    assert again.queued() == 3
    assert (
        conn.execute("SELECT count(*) FROM pages_fts WHERE pages_fts MATCH 'body'").fetchone()[0]
        == 1
    )
    conn.close()


def test_a_failed_write_rolls_the_batch_back_and_the_next_run_is_careful(
    store: SqliteStore, db: Path
) -> None:
    store.seed([url(0), url(1), url(2)])
    first = fetch_one(store)
    store.engine.flush()
    fetch_one(store)
    claimed = store.claim(HOST, "me")
    assert claimed is not None
    u = claimed.url
    bad = FetchedPage(decision(u), fetch(u), page(u, "t", "b"), "indexer", [("not a url", 1, u)])
    with pytest.raises(ValueError):
        store.fetched(bad)
    store.end_run()  # as the crawl loop does when the error ends its run
    assert committed(db, "SELECT count(*) FROM pages") == 1  # the batch went back, as a kill
    assert store.previous(first) is not None
    assert committed(db, f"SELECT state FROM urls WHERE url = '{u}'") == "queued"
    assert committed(db, "SELECT value FROM settings WHERE key = 'run_open'") == "1"
    again = SqliteStore(store.engine.conn, Clock(), batch=True)
    again.recover()
    assert again.engine.careful  # so the URL's attempts now count, each committed at once


def test_unbatched_each_write_is_committed(db: Path) -> None:
    conn = connect(db)
    store = SqliteStore(conn, Clock())
    store.seed([url(0)])
    fetch_one(store)
    assert committed(db, "SELECT count(*) FROM pages") == 1
    conn.close()


def test_the_crawl_connection_has_its_own_cache_and_checkpoints(
    store: SqliteStore, db: Path
) -> None:
    """CACHE_KIB and CHECKPOINT_PAGES on the store's connection (a bound: negative is KiB
    in SQLite); another connection to the same file (a search during the crawl) keeps
    SQLite's defaults."""
    assert store.engine.conn.execute("PRAGMA cache_size").fetchone()[0] == -CACHE_KIB
    assert committed(db, "PRAGMA cache_size") == -2000
    assert store.engine.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == CHECKPOINT_PAGES
    assert committed(db, "PRAGMA wal_autocheckpoint") == 1000
    small = SqliteStore(connect(db), Clock(), cache_kib=512)
    assert small.engine.conn.execute("PRAGMA cache_size").fetchone()[0] == -512
    small.engine.conn.close()
