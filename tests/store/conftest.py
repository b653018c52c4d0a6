"""The two crawl stores, side by side: every test taking ``store`` runs on SQLite (a file
in ``tmp_path``) and on PostgreSQL (a fresh database per test, in one real cluster
the test run shares: ``pg_cluster`` of ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_cluster import new_database
from store_helpers import LIMITS, Clock, database

from geminibot.store.crawlstore import CrawlStore, SqliteStore
from geminibot.store.db import connect
from geminibot.store.pg import connect as pg_connect
from geminibot.store.pgstore import PgStore


@pytest.fixture
def pg_url(pg_cluster: str) -> str:
    """A fresh, empty database in the session's cluster."""
    return new_database(pg_cluster)


@pytest.fixture(scope="session")
def pg_schema_template(pg_cluster: str) -> str:
    """The name of a database the migrations brought to the current schema, once per
    session: :func:`pg_db` copies it."""
    url = new_database(pg_cluster)
    pg_connect(url).close()
    return url.rsplit("/", 1)[1]


@pytest.fixture
def pg_db(pg_cluster: str, pg_schema_template: str) -> str:
    """A fresh database at the current schema (``CREATE DATABASE ... TEMPLATE``: the
    migrations' work copied, not run again; tests of the migrations take ``pg_url``)."""
    return new_database(pg_cluster, pg_schema_template)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgresql"])
def kind(request: Any) -> str:
    return str(request.param)


@pytest.fixture
def db(kind: str, request: Any, tmp_path: Path) -> str:
    """What ``--db`` would say: a file path, or a postgresql:// URL of a database at the
    current schema."""
    return database(kind, request, tmp_path, "pg_db")


@pytest.fixture
def store(kind: str, db: str, clock: Clock) -> Iterator[CrawlStore]:
    if kind == "sqlite":
        conn = connect(db)
        yield SqliteStore(conn, clock, LIMITS)
        conn.close()
    else:
        pg = PgStore(db, clock, LIMITS, lease_seconds=30)
        yield pg
        pg.close()
