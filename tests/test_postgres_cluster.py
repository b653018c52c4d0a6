"""The throwaway PostgreSQL cluster the store tests rely on starts, answers and is empty."""

from __future__ import annotations

import psycopg
from postgres_cluster import running_postgres


def test_cluster_starts_fresh_and_answers() -> None:
    with running_postgres() as dsn:
        assert dsn.startswith("postgresql://") and "@127.0.0.1:" in dsn
        with psycopg.connect(dsn) as conn:
            tables = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchone()
            assert tables == (0,)
            conn.execute("CREATE TABLE t (x int)")
            conn.execute("INSERT INTO t VALUES (1), (2)")
            assert conn.execute("SELECT sum(x) FROM t").fetchone() == (3,)
