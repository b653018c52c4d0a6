"""Schema versions on both stores: created at the current version, an older one upgraded
in place, a newer one (or a foreign database) refused with one line; a bad or unreachable
``--db`` URL is one line and its exit code, never a traceback."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import psycopg
import pytest

from geminibot.cli import main
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


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "geminibot", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("url", "code", "says"),
    [
        ("postgresql://u@127.0.0.1:1/db", 1, "cannot connect"),  # nothing listens on port 1
        ("postgresql://u@[bad/db", 2, "not a valid PostgreSQL connection string"),
        ("postgresql://u@127.0.0.1:1/db?nonsense=1", 2, "not a valid PostgreSQL connection"),
    ],
)
def test_bad_urls_are_one_line(url: str, code: int, says: str) -> None:
    for argv in (
        ["stats", "--db", url],
        ["search", "x", "--db", url],
        ["crawl", "gemini://a.test/", "--db", url],
    ):
        done = run(*argv)
        assert done.returncode == code, done.stderr
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and says in lines[0], done.stderr
        assert "Traceback" not in done.stderr
