"""Schema versions on both stores: one schema and one version for both engines, created at
the current version; every older database (built here from its old DDL) upgraded in place
to exactly the schema of a new one; a newer one (or a foreign database) refused with one
line; a bad or unreachable ``--db`` URL is one line and its exit code, never a traceback."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import legacy_schemas
import psycopg
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from store_helpers import LIMITS, Clock, database

from geminibot.cli import main
from geminibot.store import db as sqlite_db
from geminibot.store import pg
from geminibot.store.crawlstore import CrawlStore, SqliteStore
from geminibot.store.db import connect
from geminibot.store.errors import DatabaseError
from geminibot.store.pgstore import PgStore
from geminibot.store.schema import metadata
from geminibot.store.upgrade import SCHEMA_VERSION

#: What only one engine has: SQLite's FTS5 table (and the tables FTS5 keeps its index in)
#: and the change log the derived index follows (with its triggers); PostgreSQL's text
#: columns, their ``tsvector`` and its index, and its host leases.
FTS5_TABLES = {"pages_fts", "pages_fts_data", "pages_fts_idx", "pages_fts_content"}
FTS5_TABLES |= {"pages_fts_docsize", "pages_fts_config"}
SQLITE_ONLY = FTS5_TABLES | {"index_changes"}
SQLITE_TRIGGERS = {"pages_text_removed", "pages_text_changed"}
PG_ONLY_TABLES = {"host_leases"}
PG_ONLY_COLUMNS = {("pages", "headings"), ("pages", "body"), ("pages", "tsv")}
PG_ONLY_INDEXES = {"pages_tsv"}


@pytest.fixture
def db(kind: str, request: Any, tmp_path: Path) -> str:
    """An empty database (these tests make the schemas, current and old, themselves)."""
    return database(kind, request, tmp_path, "pg_url")


def version(kind: str, db: str) -> int | None:
    if kind == "sqlite":
        with sqlite3.connect(db) as conn:
            found = sqlite_db.sqlite_version(conn)
        conn.close()
        return found
    with psycopg.connect(db) as pconn:
        return pg.schema_version(pconn)


def open_db(kind: str, db: str) -> None:
    if kind == "sqlite":
        connect(db).close()
    else:
        pg.connect(db).close()


def run(kind: str, db: str, statements: tuple[str, ...]) -> None:
    """Run ``statements`` on the database as they are (one transaction)."""
    if kind == "sqlite":
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN")
        for statement in statements:
            conn.execute(statement)
        conn.execute("COMMIT")
        conn.close()
    else:
        with psycopg.connect(db) as pconn:
            for statement in statements:
                pconn.execute(statement.encode())


def make_old(kind: str, db: str, old: int) -> None:
    """A database of an engine's own ``old`` version, from before the one history, built
    from the DDL that version had."""
    if kind == "sqlite":
        statements = [s for v in legacy_schemas.SQLITE[:old] for s in v]
        run(kind, db, (*statements, f"PRAGMA user_version = {old}"))
    else:
        statements = [s for v in legacy_schemas.PG[:old] for s in v]
        run(kind, db, (*statements, f"UPDATE geminibot_schema SET version = {old}"))


@contextmanager
def inspected(kind: str, db: str) -> Iterator[sa.Connection]:
    """A SQLAlchemy connection to the database, to inspect its schema."""
    url = "sqlite://" if kind == "sqlite" else "postgresql+psycopg://"
    creator: Any = (
        (lambda: sqlite3.connect(db)) if kind == "sqlite" else (lambda: psycopg.connect(db))
    )
    engine = sa.create_engine(url, creator=creator, poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        yield connection
    engine.dispose()


def describe(kind: str, db: str) -> dict[str, Any]:
    """Tables, their columns (name, nullable, part of the primary key), indexes (name,
    columns, unique, partial) and unique constraints, triggers, and the version."""
    tables: dict[str, Any] = {}
    with inspected(kind, db) as connection:
        inspector = sa.inspect(connection)
        for table in inspector.get_table_names():
            key = set(inspector.get_pk_constraint(table)["constrained_columns"])
            columns = {
                (c["name"], bool(c["nullable"]) and c["name"] not in key, c["name"] in key)
                for c in inspector.get_columns(table)
            }
            indexes = {
                (
                    i["name"],
                    tuple(i["column_names"]),
                    bool(i["unique"]),
                    bool(i.get("dialect_options", {}).get(f"{kind}_where") is not None),
                )
                for i in inspector.get_indexes(table)
                if "duplicates_constraint" not in i
            }
            indexes |= {
                ("unique", tuple(u["column_names"]), True, False)
                for u in inspector.get_unique_constraints(table)
            }
            tables[table] = (columns, indexes)
        trigger_names = (
            "SELECT name FROM sqlite_master WHERE type = 'trigger'"
            if kind == "sqlite"
            else "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal"
        )
        triggers = {str(r[0]) for r in connection.exec_driver_sql(trigger_names)}
    return {"tables": tables, "triggers": triggers, "version": version(kind, db)}


def engine_neutral(described: dict[str, Any]) -> dict[str, Any]:
    """``described`` without what only one engine has."""
    tables = {}
    for table, (columns, indexes) in described["tables"].items():
        if table not in SQLITE_ONLY | PG_ONLY_TABLES:
            tables[table] = (
                {c for c in columns if (table, c[0]) not in PG_ONLY_COLUMNS},
                {i for i in indexes if i[0] not in PG_ONLY_INDEXES},
            )
    triggers = described["triggers"] - SQLITE_TRIGGERS
    return {"tables": tables, "triggers": triggers, "version": described["version"]}


#: :func:`describe` of a new database of each engine, made once per process.
_NEW_SCHEMA: dict[str, dict[str, Any]] = {}


def new_schema(kind: str, request: Any, tmp_path: Path) -> dict[str, Any]:
    """:func:`describe` of a new database (a file in ``tmp_path``, or a fresh PostgreSQL
    database) opened by the store: the same for every test, so described once."""
    if kind not in _NEW_SCHEMA:
        new = str(tmp_path / "new.db") if kind == "sqlite" else request.getfixturevalue("pg_url")
        open_db(kind, new)
        _NEW_SCHEMA[kind] = describe(kind, new)
    return _NEW_SCHEMA[kind]


def test_both_engines_have_one_schema_and_version(request: Any, tmp_path: Path) -> None:
    """A new SQLite file and a new PostgreSQL database: the same tables, columns and
    indexes (but for the full-text index and the host leases) at the same version."""
    sqlite_schema = new_schema("sqlite", request, tmp_path)
    pg_schema = new_schema("postgresql", request, tmp_path)
    assert sqlite_schema["version"] == pg_schema["version"] == SCHEMA_VERSION
    assert set(sqlite_schema["tables"]) >= SQLITE_ONLY
    assert sqlite_schema["triggers"] == SQLITE_TRIGGERS
    assert set(pg_schema["tables"]) >= PG_ONLY_TABLES
    assert engine_neutral(sqlite_schema) == engine_neutral(pg_schema)
    assert "urls_query_path" in {i[0] for i in pg_schema["tables"]["urls"][1]}


def test_the_schema_description_is_the_database(kind: str, db: str) -> None:
    """:func:`geminibot.store.schema.metadata` describes what the history creates: Alembic
    finds nothing to change (tables, columns, types, indexes)."""
    open_db(kind, db)
    ignored = FTS5_TABLES | {"alembic_version"}
    with inspected(kind, db) as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "include_name": lambda name, what, parent: (
                    not (what == "table" and name in ignored)
                ),
            },
        )
        assert compare_metadata(context, metadata(kind)) == []


@pytest.mark.parametrize(
    ("kind", "old"),
    [("sqlite", n) for n in range(1, 7)] + [("postgresql", n) for n in range(1, 6)],
)
def test_every_older_version_becomes_the_new_schema(
    kind: str, db: str, old: int, request: Any, tmp_path: Any
) -> None:
    """A database of every version before the one history, with the tables commands
    made outside it, is upgraded to exactly the schema a new database has."""
    make_old(kind, db, old)
    if kind == "sqlite" and old % 2:  # (with and without them)
        run(kind, db, legacy_schemas.SQLITE_EXTRAS)
    assert version(kind, db) is not None
    open_db(kind, db)
    assert describe(kind, db) == new_schema(kind, request, tmp_path)
    open_db(kind, db)  # opening again changes nothing
    assert version(kind, db) == SCHEMA_VERSION


def test_created_at_the_current_version(kind: str, db: str) -> None:
    open_db(kind, db)
    assert version(kind, db) == SCHEMA_VERSION
    open_db(kind, db)  # opening again changes nothing
    assert version(kind, db) == SCHEMA_VERSION


def test_newer_schema_refused_in_one_line(kind: str, db: str) -> None:
    open_db(kind, db)
    run(kind, db, ("UPDATE alembic_version SET version_num = '0099'",))
    with pytest.raises(DatabaseError, match="schema version 99 is newer") as info:
        open_db(kind, db)
    assert "\n" not in str(info.value)
    assert main(["stats", "--db", db]) == 2


def test_newer_schema_of_the_old_kind_refused(kind: str, db: str) -> None:
    """A database whose own version marker (before the history) says it is newer."""
    make_old(kind, db, 1)
    marker = (
        "PRAGMA user_version = 99"
        if kind == "sqlite"
        else ("UPDATE geminibot_schema SET version = 99")
    )
    run(kind, db, (marker,))
    with pytest.raises(DatabaseError, match="schema version 99 is newer"):
        open_db(kind, db)


def test_foreign_database_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE theirs (x INTEGER)")
    with pytest.raises(DatabaseError, match="not a geminibot database"):
        pg.connect(pg_url)


@pytest.mark.parametrize(
    ("url", "code", "says"),
    [
        ("postgresql://u@127.0.0.1:1/db", 2, "cannot connect"),  # nothing listens on port 1
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

#: The first version of each engine's own with ``urls.attempts``.
_ATTEMPTS_SINCE = {"sqlite": 2, "postgresql": 3}


def _make_old_with_rows(kind: str, db: str, old: int) -> None:
    """A database of its engine's own version ``old`` holding :data:`_OLD_ROWS`."""
    make_old(kind, db, old)
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
    _make_old_with_rows(kind, db, old)
    open_db(kind, db)
    assert version(kind, db) == SCHEMA_VERSION
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


@pytest.mark.parametrize(("kind", "old"), [("sqlite", 6), ("postgresql", 5)])
def test_an_older_page_keeps_when_it_went_away(kind: str, db: str, old: int) -> None:
    """Version 9's times in a database from before them: a page whose URL is gone went
    away when the URL was closed; a live page is live; no page's last change is known."""
    make_old(kind, db, old)
    rows = (("gemini://a.test/gone", "gone", 51, 2000.0), ("gemini://a.test/", "done", 20, 1000.0))
    run(
        kind,
        db,
        tuple(
            statement
            for url, state, status, at in rows
            for statement in (
                "INSERT INTO urls (url, host, path, has_query, depth, state, updated_at)"
                f" VALUES ('{url}', 'a.test', '/', false, 0, '{state}', {at})",
                "INSERT INTO pages (url, host, status, meta, size, fetched_at)"
                f" VALUES ('{url}', 'a.test', {status}, '', 0, {at - 10})",
            )
        ),
    )
    open_db(kind, db)
    with inspected(kind, db) as connection:
        got = connection.exec_driver_sql(
            "SELECT url, changed_at, gone_at FROM pages ORDER BY url"
        ).fetchall()
    assert [tuple(r) for r in got] == [
        ("gemini://a.test/", None, None),
        ("gemini://a.test/gone", None, 2000.0),
    ]


@pytest.mark.parametrize(("kind", "old"), [("sqlite", 6), ("postgresql", 5)])
def test_an_older_not_found_url_is_asked_again(kind: str, db: str, old: int) -> None:
    """Version 11: a URL an older geminibot recorded gone for a 51 (or 404) is
    ``not_found``, out of the index already (3 misses), due a day after its last answer,
    a live URL of its host again; a 52 stays gone, never due."""
    make_old(kind, db, old)
    rows = (
        ("gemini://a.test/missing", "gone", 51, 2000.0),
        ("gemini://a.test/gone", "gone", 52, 3000.0),
        ("gemini://a.test/", "done", 20, 1000.0),
    )
    run(
        kind,
        db,
        (
            "INSERT INTO hosts (host, first_seen, urls_total) VALUES ('a.test', 0, 1)",
            *(
                statement
                for url, state, status, at in rows
                for statement in (
                    "INSERT INTO urls (url, host, path, has_query, depth, state, updated_at,"
                    f" next_visit) VALUES ('{url}', 'a.test', '/', false, 0, '{state}', {at},"
                    f" {at + 50})",
                    "INSERT INTO pages (url, host, status, meta, size, fetched_at)"
                    f" VALUES ('{url}', 'a.test', {status}, '', 0, {at - 10})",
                )
            ),
        ),
    )
    open_db(kind, db)
    with inspected(kind, db) as connection:
        got = connection.exec_driver_sql(
            "SELECT url, state, misses, missing_since, next_visit FROM urls ORDER BY url"
        ).fetchall()
        total = connection.exec_driver_sql("SELECT urls_total FROM hosts").scalar()
    assert [tuple(r) for r in got] == [
        ("gemini://a.test/", "done", 0, None, 1050.0),
        ("gemini://a.test/gone", "gone", 0, None, None),
        ("gemini://a.test/missing", "not_found", 3, 2000.0, 2000.0 + 86_400.0),
    ]
    assert total == 2
