"""Frontier and visited set in SQLite: dedup, trap bounds at their edges, leases, recovery."""

import sqlite3
from pathlib import Path

import pytest
from store_helpers import Frontier

from geminibot.store.db import connect, transaction
from geminibot.store.frontier import host_key
from geminibot.store.traps import (
    DEFAULT_MAX_DEPTH,
    MAX_QUERIES_PER_PATH,
    MAX_URL_LENGTH,
    FrontierLimits,
)


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    return connect(tmp_path / "f.db")


def test_host_key() -> None:
    assert host_key("gemini://Example.ORG/x") == "example.org"
    assert host_key("gemini://example.org:1965/x") == "example.org"
    assert host_key("gemini://example.org:1966/x") == "example.org:1966"
    assert host_key("gemini://[::1]:1966/") == "[::1]:1966"


def test_dedup_and_fifo_per_host(conn: sqlite3.Connection) -> None:
    f = Frontier(conn, lambda: 1.0)
    assert f.seed(["gemini://a.test/", "gemini://b.test/"]) == {
        "gemini://a.test/": "queued",
        "gemini://b.test/": "queued",
    }
    with transaction(conn):
        assert f.add("gemini://a.test/1", 1) == "queued"
        assert f.add("gemini://a.test/", 1) == "known"
    assert list(f.hosts_with_work()) == ["a.test", "b.test"]
    assert f.hosts_with_work() == {"a.test": 2, "b.test": 1}  # oldest first, counted
    first = f.claim("a.test", "L")
    assert first is not None and first.url == "gemini://a.test/" and first.depth == 0
    second = f.claim("a.test", "L")
    assert second is not None and second.url == "gemini://a.test/1"
    assert f.claim("a.test", "L") is None
    with transaction(conn):
        f.finish(first.url, "done")
        assert f.add(first.url, 3) == "known"  # visited stays visited
    assert f.leased() == ["gemini://a.test/1"]


def test_recover_returns_leases(tmp_path: Path) -> None:
    conn = connect(tmp_path / "r.db")
    f = Frontier(conn, lambda: 1.0)
    f.seed(["gemini://a.test/x", "gemini://a.test/y"])
    assert f.claim("a.test", "L") is not None
    conn.close()  # as if killed: the lease was committed, nothing else
    conn = connect(tmp_path / "r.db")
    f = Frontier(conn, lambda: 2.0)
    assert f.leased() == ["gemini://a.test/x"]
    assert f.recover() == 1
    assert f.queued() == 2
    claim = f.claim("a.test", "M")
    assert claim is not None and claim.url == "gemini://a.test/x"


def test_url_length_bound_edge(conn: sqlite3.Connection) -> None:
    f = Frontier(conn, lambda: 1.0)
    base = "gemini://a.test/"
    ok = base + "a" * (MAX_URL_LENGTH - len(base))
    too_long = ok + "a"
    with transaction(conn):
        assert f.add(ok, 0) == "queued"
        assert f.add(too_long, 0) == f"trapped: URL longer than {MAX_URL_LENGTH} bytes"
        assert f.add(too_long, 0) == "known"
    assert f.state_of(too_long) == ("trapped", f"URL longer than {MAX_URL_LENGTH} bytes")


def test_depth_bound_edge(conn: sqlite3.Connection) -> None:
    f = Frontier(conn, lambda: 1.0)
    with transaction(conn):
        assert f.add("gemini://a.test/d", DEFAULT_MAX_DEPTH) == "queued"
        assert f.add("gemini://a.test/e", DEFAULT_MAX_DEPTH + 1).startswith("trapped: deeper")


def test_query_strings_per_path_edge(conn: sqlite3.Connection) -> None:
    f = Frontier(conn, lambda: 1.0)
    with transaction(conn):
        for i in range(MAX_QUERIES_PER_PATH):
            assert f.add(f"gemini://a.test/cal?{i}", 1) == "queued"
        assert f.add("gemini://a.test/cal?next", 1).startswith("trapped: more than")
        assert f.add("gemini://a.test/other?1", 1) == "queued"
        assert f.add("gemini://a.test/cal", 1) == "queued"


def test_urls_per_host_edge(conn: sqlite3.Connection) -> None:
    f = Frontier(conn, lambda: 1.0, FrontierLimits(max_urls_per_host=3))
    with transaction(conn):
        assert [f.add(f"gemini://a.test/{i}", 1) for i in range(3)] == ["queued"] * 3
        assert f.add("gemini://a.test/3", 1) == "trapped: more than 3 URLs on the host"
        assert f.add("gemini://b.test/0", 1) == "queued"
