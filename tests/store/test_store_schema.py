"""Schema versions on both stores: created at the current version, an older one upgraded
in place, a newer one (or a foreign database) refused with one line; a bad or unreachable
``--db`` URL is one line and its exit code, never a traceback."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from store_helpers import LIMITS, Clock

from geminibot.cli import main
from geminibot.crawl.pgstore import PgStore
from geminibot.crawl.store import CrawlStore, SqliteStore
from geminibot.index import DatabaseError, connect, pg
from geminibot.index import db as sqlite_db


def version(kind: str, db: str) -> int | None:
    if kind == "sqlite":
        with sqlite3.connect(db) as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
    with psycopg.connect(db) as conn:
        return pg.schema_version(conn)


def set_version(kind: str, db: str, n: int) -> None:
    if kind == "sqlite":
        conn = sqlite3.connect(db)
        conn.execute(f"PRAGMA user_version = {n}")
        conn.close()
    else:
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("UPDATE geminibot_schema SET version = %s", (n,))


def open_db(kind: str, db: str) -> None:
    if kind == "sqlite":
        connect(db).close()
    else:
        pg.connect(db).close()


def test_created_at_the_current_version(kind: str, db: str) -> None:
    open_db(kind, db)
    current = sqlite_db.SCHEMA_VERSION if kind == "sqlite" else pg.SCHEMA_VERSION
    assert version(kind, db) == current
    open_db(kind, db)  # opening again changes nothing
    assert version(kind, db) == current


def test_newer_schema_refused_in_one_line(kind: str, db: str) -> None:
    open_db(kind, db)
    set_version(kind, db, 99)
    with pytest.raises(DatabaseError, match="schema version 99 is newer") as info:
        open_db(kind, db)
    assert "\n" not in str(info.value)
    assert main(["stats", "--db", db]) == 2


def test_older_schema_upgraded_in_place(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PostgreSQL database of the current version meets a geminibot whose schema has
    one more."""
    pg.connect(pg_url).close()
    newer = ("CREATE TABLE upgraded (x INTEGER)",)
    monkeypatch.setattr(pg, "MIGRATIONS", (*pg.MIGRATIONS, newer))
    monkeypatch.setattr(pg, "SCHEMA_VERSION", pg.SCHEMA_VERSION + 1)
    pg.connect(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        assert pg.schema_version(conn) == pg.SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM upgraded").fetchone() == (0,)


def test_version_1_upgraded_in_place(pg_url: str) -> None:
    """A version-1 PostgreSQL database (before URL attempts and certificate pins) is
    upgraded in place to the current version, its rows kept."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pg, "MIGRATIONS", pg.MIGRATIONS[:1])
        patch.setattr(pg, "SCHEMA_VERSION", 1)
        with pg.connect(pg_url) as conn:
            assert pg.schema_version(conn) == 1
            conn.execute(
                "INSERT INTO urls (url, host, path, has_query, depth, state, updated_at)"
                " VALUES ('gemini://a.test/', 'a.test', '/', false, 0, 'queued', 0)"
            )
    pg.connect(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        assert pg.schema_version(conn) == pg.SCHEMA_VERSION
        assert conn.execute("SELECT url, attempts FROM urls").fetchall() == [
            ("gemini://a.test/", 0)
        ]
        assert conn.execute("SELECT count(*) FROM pins").fetchone() == (0,)


def test_foreign_database_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE theirs (x INTEGER)")
    with pytest.raises(DatabaseError, match="not a geminibot database"):
        pg.connect(pg_url)


@pytest.mark.parametrize(
    ("url", "code", "says"),
    [
        ("postgresql://u@127.0.0.1:1/db", 1, "cannot connect"),  # nothing listens on port 1
        ("postgresql://u@[bad/db", 2, "not a valid PostgreSQL connection string"),
        ("postgresql://u@127.0.0.1:1/db?nonsense=1", 2, "not a valid PostgreSQL connection"),
    ],
)
def test_bad_urls_are_one_line(
    url: str, code: int, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """(In this process: ``main`` returning its code is what ``geminibot`` exits with;
    an exception would fail the test, as a traceback would.)"""
    for argv in (
        ["stats", "--db", url],
        ["search", "x", "--db", url],
        ["crawl", "gemini://a.test/", "--db", url],
    ):
        assert main(argv) == code
        out, err = capsys.readouterr()
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == 1 and says in lines[0], err


# Rows an older crawl left: (url, state, reason, updated_at, attempts where the version
# has the column) and what the freshness version makes of them: (next_visit, attempts).
_OLD_ROWS = (
    ("gemini://a.test/", "done", None, 1000.0, 1, (1000.0 + 86400, 0)),
    ("gemini://a.test/r", "refused", "robots.txt", 1100.0, 1, (1100.0 + 86400, 0)),
    ("gemini://a.test/f", "failed", "timeout", 2000.0, 1, (2000.0 + 3600, 1)),
    ("gemini://a.test/q", "queued", None, 0.0, 0, (None, 0)),
)
_GIVEN_UP = ("gemini://a.test/g", "failed", "given up: 3 attempts ended abnormally", 3000.0, 3)

#: The first version of each store with ``urls.attempts``.
_ATTEMPTS_SINCE = {"sqlite": 2, "postgresql": 3}


def _make_old(kind: str, db: str, old: int) -> None:
    """A database of schema version ``old`` holding :data:`_OLD_ROWS`."""
    module = sqlite_db if kind == "sqlite" else pg
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", module.MIGRATIONS[:old])
        patch.setattr(module, "SCHEMA_VERSION", old)
        open_db(kind, db)
    has_attempts = old >= _ATTEMPTS_SINCE[kind]
    rows = [r[:5] for r in _OLD_ROWS] + ([_GIVEN_UP] if has_attempts else [])
    columns = "url, host, path, has_query, depth, state, reason, updated_at"
    if has_attempts:
        columns += ", attempts"
    values = [
        (url, "a.test", "/", False, 0, state, reason, at, *((n,) if has_attempts else ()))
        for url, state, reason, at, n in rows
    ]
    marks = ", ".join(["?" if kind == "sqlite" else "%s"] * len(values[0]))
    sql = f"INSERT INTO urls ({columns}) VALUES ({marks})"
    if kind == "sqlite":
        with sqlite3.connect(db) as conn:
            conn.executemany(sql, values)
        conn.close()
    else:
        with psycopg.connect(db) as pconn, pconn.cursor() as cur:
            cur.executemany(sql.encode(), values)
    assert version(kind, db) == old


@pytest.mark.parametrize(
    ("kind", "old"),
    [("sqlite", 1), ("sqlite", 2), ("postgresql", 1), ("postgresql", 2), ("postgresql", 3)],
)
def test_every_version_before_freshness_upgraded_in_place(
    kind: str, db: str, old: int, clock: Clock
) -> None:
    """A database of any version before freshness (SQLite 1, 2; PostgreSQL 1, 2, 3) is
    upgraded in place to the current one: its rows kept, finished URLs due a day after
    their last change, a failure an hour after with one attempt counted, a URL given up
    never; then the crawl resumes: its queued URL is claimed."""
    _make_old(kind, db, old)
    open_db(kind, db)
    current = sqlite_db.SCHEMA_VERSION if kind == "sqlite" else pg.SCHEMA_VERSION
    assert version(kind, db) == current
    sql = "SELECT url, next_visit, attempts FROM urls ORDER BY url"
    if kind == "sqlite":
        with sqlite3.connect(db) as conn:
            got = conn.execute(sql).fetchall()
        conn.close()
    else:
        with psycopg.connect(db) as pconn:
            got = pconn.execute(sql).fetchall()
    want = [(url, *after) for url, *_, after in _OLD_ROWS]
    if old >= _ATTEMPTS_SINCE[kind]:
        want.append((_GIVEN_UP[0], None, 3))
    assert sorted(got) == sorted(want)
    if kind == "sqlite":
        conn = connect(db)
        resume(SqliteStore(conn, clock, LIMITS))
        conn.close()
    else:
        store = PgStore(db, clock, LIMITS, lease_seconds=30)
        resume(store)
        store.close()


def resume(store: CrawlStore) -> None:
    """A crawl resumed at the store clock's time (long after the old rows): the done,
    refused and failed URLs are due, the given-up one is not; the queued URL is claimed."""
    store.recover()
    assert store.revisit(1_000_000.0) == 3
    assert store.lease_host("a.test", "me") is not None
    claimed = set()
    while (c := store.claim("a.test", "me")) is not None:
        claimed.add(c.url)
    assert claimed == {url for url, *_ in _OLD_ROWS}
