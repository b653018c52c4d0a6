"""The trap bounds on both stores (SQLite, PostgreSQL) alike: every trapped URL recorded as
a refusing decision (``trap: <bound>``), in the order the URLs were met, and the deep-URL
bound per host (geminibot.store.traps) counted in the database, so that it holds across a
restart and across crawl processes sharing one PostgreSQL database."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from store_helpers import LIMITS, Clock
from test_store import A, commit

from geminibot.store.crawlstore import CrawlStore, SqliteStore
from geminibot.store.db import connect
from geminibot.store.pgstore import PgStore
from geminibot.store.traps import FrontierLimits

NOON = datetime(2026, 11, 25, 12, tzinfo=UTC).timestamp()
#: A deep-URL bound small enough to reach (the per-host cap well above it).
DEEP = FrontierLimits(max_deep_urls_per_host=2, max_urls_per_host=50)
DEEP_BOUND = "more than 2 URLs deeper than 4 segments on the host"


def sql(kind: str, db: str, statement: str) -> list[tuple[Any, ...]]:
    """Run ``statement`` on the crawl database ``db`` outside the store; its rows."""
    if kind == "sqlite":
        conn = sqlite3.connect(db, isolation_level=None)
        try:
            return conn.execute(statement).fetchall()
        finally:
            conn.close()
    with psycopg.connect(db, autocommit=True) as pg:
        cur = pg.execute(statement.encode())
        return cur.fetchall() if cur.description else []


def decisions(kind: str, db: str) -> list[tuple[str, bool, str]]:
    rows = sql(kind, db, "SELECT url, allowed, reason FROM decisions ORDER BY id")
    return [(str(url), bool(allowed), str(reason)) for url, allowed, reason in rows]


def open_store(kind: str, db: str, clock: Clock, limits: FrontierLimits) -> CrawlStore:
    if kind == "sqlite":
        return SqliteStore(connect(db), clock, limits)
    return PgStore(db, clock, limits, lease_seconds=30)


def close(store: CrawlStore) -> None:
    if isinstance(store, SqliteStore):
        store.engine.conn.close()
    else:
        assert isinstance(store, PgStore)
        store.close()


@pytest.fixture
def deep(kind: str, db: str, clock: Clock) -> Iterator[CrawlStore]:
    """A store with the :data:`DEEP` bounds."""
    store = open_store(kind, db, clock, DEEP)
    yield store
    close(store)


def test_every_trapped_url_is_a_refusing_decision(
    store: CrawlStore, kind: str, db: str, clock: Clock
) -> None:
    """Seeds and a page's links, each trap bound once, recorded in the order met."""
    clock.now = NOON
    long = A + "x" * LIMITS.max_url_length
    seeds = [A, A + "a/a/a/a", long, A + "q?1", A + "q?2", A + "q?3"]
    got = store.seed(seeds)
    assert [u for u in seeds if got[u] == "queued"] == [A, A + "q?1", A + "q?2"]
    links = [A + "ok", A + "/".join(f"s{k}" for k in range(13))]
    woken = commit(store, A, "Home", "text", links)
    assert woken == {"a.test": 1}
    expected = [
        (A + "a/a/a/a", "a path segment repeated more than 3 times"),
        (long, f"URL longer than {LIMITS.max_url_length} bytes"),
        (A + "q?3", f"more than {LIMITS.max_queries_per_path} query strings on the path"),
    ]
    assert decisions(kind, db) == [
        *[(url, False, f"trap: {reason}") for url, reason in expected],
        (A, True, "because"),  # the page's own decision, then its links' traps
        (links[1], False, "trap: more than 12 path segments"),
    ]
    for url, reason in expected:
        assert store.state_of(url) == ("trapped", reason)


#: Bounds that leave room for a calendar's run of dates on one host.
ROOMY = FrontierLimits(max_urls_per_host=100, max_queries_per_path=100)


@pytest.mark.parametrize("batched", [False, True])
def test_a_calendar_run_is_trapped_and_one_date_is_not(
    kind: str, db: str, clock: Clock, batched: bool
) -> None:
    """Twelve days in a row, then the thirteenth out of range: trapped, whether the run was
    met earlier or in the same batch of links; a lone historical date is queued."""
    clock.now = NOON
    store = open_store(kind, db, clock, ROOMY)
    try:
        run = [f"{A}cal?day=2030-12-{d:02d}" for d in range(20, 32)]
        trap, lone = A + "cal?day=2031-01-01", A + "apollo/1969-07-20.gmi"
        if batched:
            got = store.seed([A, *run, trap, lone])
        else:
            store.seed([A, *run])
            got = store.seed([trap, lone])
        reason = "a calendar date more than 2 years ahead"
        assert got[trap] == f"trapped: {reason}" and got[lone] == "queued"
        assert all(store.state_of(u) == ("queued", None) for u in run)
        assert [r for r in decisions(kind, db) if not r[1]] == [(trap, False, f"trap: {reason}")]
    finally:
        close(store)


def test_the_per_host_cap_is_a_refusing_decision(store: CrawlStore, kind: str, db: str) -> None:
    cap = LIMITS.max_urls_per_host
    urls = [f"{A}{i}" for i in range(cap + 1)]
    store.seed(urls)
    assert decisions(kind, db) == [(urls[-1], False, f"trap: more than {cap} URLs on the host")]


def test_deep_urls_per_host_edge(deep: CrawlStore, kind: str, db: str) -> None:
    """Two deep URLs on a host, not three; shallow ones and other hosts' are not counted;
    links found on a page count as seeds do."""
    d = A + "a/b/c/d/"
    assert deep.seed([A, d + "1", A + "a/b/c/shallow"]) == {
        A: "queued",
        d + "1": "queued",
        A + "a/b/c/shallow": "queued",
    }
    commit(deep, A, "Home", "text", [d + "2", d + "3", "gemini://b.test/a/b/c/d/e"])
    bound = DEEP_BOUND
    assert deep.state_of(d + "2") == ("queued", None)
    assert deep.state_of(d + "3") == ("trapped", bound)
    assert deep.state_of("gemini://b.test/a/b/c/d/e") == ("queued", None)
    assert deep.seed([d + "4", A + "a/b/c/other"]) == {
        d + "4": f"trapped: {bound}",
        A + "a/b/c/other": "queued",
    }
    assert [r for r in decisions(kind, db) if not r[1]] == [
        (d + "3", False, f"trap: {bound}"),
        (d + "4", False, f"trap: {bound}"),
    ]


def test_the_deep_count_survives_a_restart_and_an_upgrade(
    deep: CrawlStore, kind: str, db: str, clock: Clock
) -> None:
    """The count is kept per host in the database; one from before it (NULL) is taken
    from the host's rows when first needed."""
    d = A + "a/b/c/d/"
    deep.seed([d + "1"])
    again = open_store(kind, db, clock, DEEP)
    try:
        assert again.seed([d + "2", d + "3"])[d + "3"].startswith("trapped: more than 2 URLs")
    finally:
        close(again)
    assert sql(kind, db, "SELECT deep_urls FROM hosts") == [(2,)]
    sql(kind, db, "UPDATE hosts SET deep_urls = NULL")
    upgraded = open_store(kind, db, clock, DEEP)
    try:
        assert upgraded.seed([d + "4"])[d + "4"].startswith("trapped: more than 2 URLs")
        assert upgraded.seed([A + "shallow"]) == {A + "shallow": "queued"}
    finally:
        close(upgraded)
    assert sql(kind, db, "SELECT deep_urls FROM hosts") == [(2,)]


def test_two_processes_share_the_deep_count(pg_db: str, clock: Clock) -> None:
    """On PostgreSQL, crawl processes adding to one host see each other's deep URLs."""
    first = PgStore(pg_db, clock, DEEP, lease_seconds=30)
    second = PgStore(pg_db, clock, DEEP, lease_seconds=30)
    try:
        d = A + "a/b/c/d/"
        assert first.seed([d + "1"]) == {d + "1": "queued"}
        assert second.seed([d + "2"]) == {d + "2": "queued"}
        assert first.seed([d + "3"]) == {d + "3": f"trapped: {DEEP_BOUND}"}
    finally:
        first.close()
        second.close()


def test_calendar_dates_are_judged_on_the_stores_clock(kind: str, db: str, clock: Clock) -> None:
    """The calendar trap's "today" is the crawl clock's date, not the machine's: on
    1 January 1995, after the twelve months before each, May 1998 is more than two years
    ahead and May 1996 is not."""
    clock.now = datetime(1995, 1, 1, tzinfo=UTC).timestamp()
    store = open_store(kind, db, clock, ROOMY)
    try:
        for year, host in ((1997, "a.test"), (1995, "b.test")):
            months = [(year, m) for m in range(5, 13)] + [(year + 1, m) for m in range(1, 5)]
            assert set(store.seed([f"gemini://{host}/c/{y}-{m}" for y, m in months]).values()) == {
                "queued"
            }
        ahead, near = A + "c/1998-5", "gemini://b.test/c/1996-5"
        assert store.seed([ahead]) == {ahead: "trapped: a calendar date more than 2 years ahead"}
        assert store.seed([near]) == {near: "queued"}
    finally:
        close(store)
