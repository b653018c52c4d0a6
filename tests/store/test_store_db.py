"""The crawl database: creation, migrations by version, refusal of foreign files."""

import re
import sqlite3
import threading
import time
from pathlib import Path

import legacy_schemas
import pytest

from geminibot.store.db import SCHEMA_VERSION, _open, connect, get_setting, set_setting, transaction
from geminibot.store.errors import DatabaseError
from geminibot.store.sqlite_sql import ENGINE
from geminibot.store.statements import (
    CLAIM,
    DEEP_PATHS,
    LOCK_HOSTS,
    QUERIES_ON_PATH,
    URL_STATES,
)
from geminibot.store.upgrade import upgrade


def test_new_database_is_wal_and_current(tmp_path: Path) -> None:
    conn = connect(tmp_path / "c.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    again = connect(tmp_path / "c.db")  # reopening does not migrate twice
    assert again.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def schema_of(path: Path) -> tuple[object, ...]:
    """Everything of a database's schema: sqlite_master (FTS5's shadow tables included),
    the stamped version, user_version."""
    conn = sqlite3.connect(path)
    try:
        master = sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        stamped = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        return master, stamped, conn.execute("PRAGMA user_version").fetchone()
    finally:
        conn.close()


def test_a_new_database_has_the_schema_the_migrations_make(tmp_path: Path) -> None:
    """A new file gets the schema replayed from what the migrations made of an empty file
    once in this process: the same tables, columns, indexes, triggers, FTS5 table and
    version as running the whole history on it."""
    connect(tmp_path / "first.db").close()  # (the process's copy is made by now)
    connect(tmp_path / "new.db").close()
    upgrade(lambda: _open(tmp_path / "migrated.db"), "sqlite")
    new, migrated = schema_of(tmp_path / "new.db"), schema_of(tmp_path / "migrated.db")
    assert new == migrated
    assert len(new[0]) > 30 and new[1] == migrated[1] != []  # (not two empty files)


def test_missing_database_for_readers(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="no such database"):
        connect(tmp_path / "absent.db", create=False)


def test_not_a_database(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite at all, just text\n" * 100)
    with pytest.raises(DatabaseError, match="not a usable geminibot database"):
        connect(bad)


def test_foreign_sqlite_database(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE t (x)")
    c.commit()
    c.close()
    with pytest.raises(DatabaseError, match="not a geminibot one"):
        connect(other)


def test_newer_schema_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    connect(path).close()
    c = sqlite3.connect(path)
    c.execute(f"UPDATE alembic_version SET version_num = '{SCHEMA_VERSION + 1:04d}'")
    c.commit()
    c.close()
    with pytest.raises(DatabaseError, match="newer"):
        connect(path)


def test_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    conn = connect(tmp_path / "c.db")
    with pytest.raises(RuntimeError), transaction(conn):
        set_setting(conn, "role", "indexer")
        raise RuntimeError("boom")
    assert get_setting(conn, "role") is None
    with transaction(conn):
        set_setting(conn, "role", "indexer")
        set_setting(conn, "role", "archiver")  # idempotent upsert
    assert get_setting(conn, "role") == "archiver"


def _indexes(conn: sqlite3.Connection, table: str) -> set[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?"
        " AND name NOT LIKE 'sqlite_autoindex%'",
        (table,),
    )
    return {str(r[0]) for r in rows}


def _plan(conn: sqlite3.Connection, sql: str) -> str:
    names = re.findall(r":(\w+)", sql)
    params: dict[str, str] | tuple[str, ...] = (
        dict.fromkeys(names, "x") if names else ("x",) * sql.count("?")
    )
    return " | ".join(str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))


def test_a_writer_beside_a_crawl_asks_again_until_the_crawl_lets_go(tmp_path: Path) -> None:
    """A crawl holds the write lock for batches and takes it again right after each commit:
    a writer beside it (``/submit``, ``geminibot recheck``) asks for the lock again and
    again (each try a ``BEGIN IMMEDIATE`` of its own, every LOCK_RETRY), not once with
    SQLite's backing-off wait, and gets in once the crawl lets go."""
    path = tmp_path / "c.db"
    writer = connect(path)
    writer.execute("PRAGMA busy_timeout = 5000")
    tries: list[str] = []
    writer.set_trace_callback(lambda sql: tries.append(sql) if sql.startswith("BEGIN") else None)
    crawl = _open(path, any_thread=True)
    crawl.execute("BEGIN IMMEDIATE")  # a batch, held
    asked_again = threading.Event()

    def let_go_once_asked_again() -> None:
        deadline = time.monotonic() + 60.0
        while len(tries) < 3 and time.monotonic() < deadline:
            time.sleep(0.001)
        asked_again.set()
        crawl.execute("COMMIT")

    thread = threading.Thread(target=let_go_once_asked_again)
    thread.start()
    try:
        with transaction(writer):
            set_setting(writer, "submitted", "1")
    finally:
        thread.join()
        crawl.close()
    assert asked_again.is_set() and len(tries) >= 3
    assert writer.execute("PRAGMA busy_timeout").fetchone()[0] == 5000  # (as it was)
    assert get_setting(writer, "submitted") == "1"


def test_version_4_loses_the_indexes_no_query_reads(tmp_path: Path) -> None:
    """Version 5: ``decisions_url`` and ``urls_host_path`` go (each cost every insert),
    ``urls_query_path`` holds the URLs with a query string only; the rows stay."""
    path = tmp_path / "crawl.db"
    old = sqlite3.connect(path, isolation_level=None)
    for statement in (s for version in legacy_schemas.SQLITE[:4] for s in version):
        old.execute(statement)
    old.execute("PRAGMA user_version = 4")
    old.execute(
        "INSERT INTO urls (url, host, path, has_query, depth, state, updated_at)"
        " VALUES ('gemini://a.test/?q', 'a.test', '/', 1, 0, 'queued', 0)"
    )
    old.close()
    assert "urls_host_path" in _indexes(sqlite3.connect(path), "urls")
    conn = connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert _indexes(conn, "urls") == {
        "urls_host_state",
        "urls_state",
        "urls_query_path",
        "urls_next_visit",
    }
    assert _indexes(conn, "decisions") == {"decisions_at"}
    assert conn.execute("SELECT count(*) FROM urls").fetchone()[0] == 1


def test_frontier_queries_use_an_index(tmp_path: Path) -> None:
    """Every query the frontier runs per URL searches an index (none scans ``urls`` or
    ``hosts``); a list parameter is joined with, not made a temporary index at each run
    (``LIST SUBQUERY``)."""
    conn = connect(tmp_path / "crawl.db")
    queries = {
        URL_STATES: ("urls", "sqlite_autoindex_urls_1"),
        LOCK_HOSTS: ("hosts", "sqlite_autoindex_hosts_1"),
        QUERIES_ON_PATH: ("urls", "urls_query_path"),
        DEEP_PATHS: ("urls", "urls_host_state"),
        CLAIM: ("urls", "urls_host_state"),
    }
    for statement, (table, index) in queries.items():
        sql = ENGINE.sql[statement]
        steps = _plan(conn, sql).split(" | ")
        searches = [step for step in steps if step.startswith(f"SEARCH {table} USING")]
        assert searches and f"INDEX {index} " in searches[0], (sql, steps)
        assert not [s for s in steps if s.startswith(f"SCAN {table}") or "SUBQUERY" in s], steps


def test_the_claim_is_one_index_scan_in_its_order_on_both_engines(kind: str, db: str) -> None:
    """A host's next URL (a submitted one first, then the oldest) is read from
    ``urls_host_state`` in the claim's order, on a frontier of thousands of URLs with
    the engine's statistics: no scan of ``urls``, no sort (SQLite: no temporary B-tree;
    PostgreSQL: no Sort node)."""
    from store_helpers import opened

    from geminibot.store.pg_sql import ENGINE as PG

    rows = [
        (
            f"gemini://h{n % 4}.test/{n}",
            f"h{n % 4}.test",
            f"/{n}",
            False,
            1,
            state,
            0.0,
            int(n % 97 == 0),
        )
        for n in range(4000)
        for state in ["queued" if n % 3 else "done"]
    ]
    with opened(kind, db) as (conn, mark):
        insert = (
            "INSERT INTO urls (url, host, path, has_query, depth, state, updated_at, priority)"
            f" VALUES ({', '.join([mark] * 8)})"
        )
        if kind == "sqlite":
            conn.executemany(insert, rows)
            conn.commit()
            conn.execute("ANALYZE")
            plan = _plan(conn, ENGINE.sql[CLAIM])
            assert plan == "SEARCH urls USING INDEX urls_host_state (host=? AND state=?)", plan
            return
        with conn.cursor() as cur:
            cur.executemany(insert.encode(), rows)
        conn.execute("ANALYZE urls")
        explained = conn.execute(b"EXPLAIN " + PG.sql[CLAIM].encode(), {"host": "h1.test"})
        plan = " | ".join(str(r[0]).strip() for r in explained)
    assert "Index Scan using urls_host_state on urls" in plan, plan
    assert "Sort" not in plan and "Seq Scan" not in plan, plan


def test_a_pages_fetch_history_is_read_through_an_index(tmp_path: Path) -> None:
    """``why`` and ``/check`` read a URL's last answers through ``fetches_url``, not a
    scan of the log."""
    from geminibot.store.lookups import HISTORY_ROWS

    conn = connect(tmp_path / "crawl.db")
    plan = _plan(conn, ENGINE.sql[HISTORY_ROWS])
    assert plan.startswith("SEARCH fetches USING INDEX fetches_url "), plan


def test_a_hosts_newest_requests_are_read_through_an_index(tmp_path: Path) -> None:
    """``why`` and ``/check`` read a host's newest requests (the longest wait between two)
    through ``fetches_host_started``, in its order: no scan of the log, no sort."""
    from geminibot.store.lookups import WAITS

    conn = connect(tmp_path / "crawl.db")
    plan = _plan(conn, ENGINE.sql[WAITS])
    assert plan == "SEARCH fetches USING INDEX fetches_host_started (host=?)", plan


def test_null_and_flags_are_bound_as_they_are(tmp_path: Path) -> None:
    """None and booleans are found in sqlite3's adapters' table (no AttributeErrors made
    and cleared per parameter) and bound as without an entry: NULL, 1 and 0."""
    assert sqlite3.adapters[(type(None), sqlite3.PrepareProtocol)](None) is None
    assert sqlite3.adapters[(bool, sqlite3.PrepareProtocol)] is int
    conn = connect(tmp_path / "crawl.db")
    row = conn.execute(
        "SELECT :a, typeof(:a), :t, typeof(:t), :f", {"a": None, "t": True, "f": False}
    )
    assert row.fetchone() == (None, "null", 1, "integer", 0)
