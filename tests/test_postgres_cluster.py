"""The throwaway PostgreSQL cluster the store tests rely on: one per test run, started by
whichever process asks first (the others get the same one), fresh, answering, and
stopped at the run's end."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from postgres_cluster import shared_postgres, stop_shared_postgres


def test_one_shared_cluster_starts_fresh_answers_and_stops(tmp_path: Path) -> None:
    # Two askers at once (each takes the folder's lock through its own open file, as two
    # worker processes do): one starts the cluster, the other is given the same.
    with ThreadPoolExecutor(2) as pool:
        urls = list(pool.map(shared_postgres, [tmp_path, tmp_path]))
    try:
        dsn = urls[0]
        assert urls == [dsn, dsn]
        assert dsn.startswith("postgresql://") and "@127.0.0.1:" in dsn
        with psycopg.connect(dsn) as conn:
            tables = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchone()
            assert tables == (0,)
            conn.execute("CREATE TABLE t (x int)")
            conn.execute("INSERT INTO t VALUES (1), (2)")
            assert conn.execute("SELECT sum(x) FROM t").fetchone() == (3,)
        assert shared_postgres(tmp_path) == dsn  # a later asker: still the same one
    finally:
        assert stop_shared_postgres(tmp_path)
    with pytest.raises(psycopg.OperationalError):  # stopped: nothing listens any more
        psycopg.connect(dsn, connect_timeout=5).close()
    assert not stop_shared_postgres(tmp_path)  # nothing left to stop
