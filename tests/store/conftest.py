"""The two crawl stores, side by side: every test taking ``store`` runs on SQLite (a file
in ``tmp_path``) and on PostgreSQL (a fresh database per test, in one real cluster
started once per session by ``postgres_cluster.running_postgres``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from postgres_cluster import running_postgres
from store_helpers import LIMITS, Clock

from geminibot.crawl.pgstore import PgStore
from geminibot.crawl.store import CrawlStore, SqliteStore
from geminibot.index import connect

_numbers = itertools.count()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[str]:
    with running_postgres() as url:
        yield url


@pytest.fixture
def pg_url(pg_cluster: str) -> str:
    """A fresh, empty database in the session's cluster."""
    name = f"t{next(_numbers)}"
    with psycopg.connect(pg_cluster, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}".encode())
    return pg_cluster.rsplit("/", 1)[0] + "/" + name


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgresql"])
def kind(request: Any) -> str:
    return str(request.param)


@pytest.fixture
def db(kind: str, request: Any, tmp_path: Path) -> str:
    """What ``--db`` would say: a file path, or a postgresql:// URL."""
    if kind == "sqlite":
        return str(tmp_path / "crawl.db")
    return str(request.getfixturevalue("pg_url"))


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
