"""Vanished hosts (geminibot.store.freshness: ``VANISHED_AFTER``, ``VANISHED_FAILURES``) on
both stores (SQLite, PostgreSQL): a host unanswered long enough, and often enough, while
another host answered, has its pages taken out of the search index; each bound at its
edge; a page that answers again is indexed again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from db_rows import reading
from store_helpers import Clock
from test_store import page

from geminibot.store.crawlstore import (
    CrawlStore,
    DecisionRecord,
    FetchedPage,
    FetchRecord,
    HostState,
)
from geminibot.store.freshness import DAY, VANISHED_AFTER, VANISHED_FAILURES

A, B, C = "gemini://a.test/", "gemini://b.test/", "gemini://c.test/"


def host_of(url: str) -> str:
    return url.split("/")[2]


def request(url: str, at: float, status: int | None) -> FetchRecord:
    state = HostState(last_end=at + 0.5, last_duration=0.5, not_before=at + 2, slow_downs=0)
    error = None if status is not None else "connection refused"
    return FetchRecord(url, host_of(url), status, "", error, at, 0.5, state)


def index(store: CrawlStore, url: str, text: str, at: float, **kw: Any) -> None:
    """Claim ``url`` and commit it as a page answered at ``at`` with ``text``."""
    host = host_of(url)
    assert store.lease_host(host, "me") is not None
    claimed = store.claim(host, "me")
    assert claimed is not None and claimed.url == url
    p = replace(page(url, "T", text, content_hash=f"h-{text}"), host=host, fetched_at=at, **kw)
    decision = DecisionRecord(url, host, True, "allowed", at)
    store.fetched(FetchedPage(decision, request(url, at, 20), p, "indexer", []))


def fail(store: CrawlStore, url: str, at: float) -> None:
    """A request to ``url``'s host that got no answer (as a robots.txt fetch logs it)."""
    store.log_fetch(request(url + "robots.txt", at, None))


def found(db: str, word: str) -> list[str]:
    with reading(db) as (conn, search):
        return [r.url for r in search(conn, word, 10)]


def failures(db: str, host: str) -> tuple[Any, ...]:
    with reading(db) as (conn, _):
        row = conn.execute(
            f"SELECT failures, failing_since FROM hosts WHERE host = '{host}'"
        ).fetchone()
    return tuple(row)


def test_a_vanished_host_leaves_the_index_at_the_bounds(
    store: CrawlStore, db: str, clock: Clock
) -> None:
    t0 = clock.now
    store.seed([A, B])
    index(store, A, "alpha", t0)
    index(store, B, "beta", t0)
    first = t0 + 100
    for k in range(VANISHED_FAILURES - 1):
        fail(store, B, first + k * DAY)
    store.log_fetch(request(A + "robots.txt", first + k * DAY + 3600, 20))  # a.test answers
    assert failures(db, "b.test") == (VANISHED_FAILURES - 1, first)
    assert store.delist_vanished(first + 2 * VANISHED_AFTER) == 0  # one failure short
    fail(store, B, first + VANISHED_FAILURES * DAY)
    assert VANISHED_FAILURES * DAY < VANISHED_AFTER - 1
    assert store.delist_vanished(first + VANISHED_AFTER - 1) == 0  # one second short
    assert found(db, "beta") == [B]
    assert store.delist_vanished(first + VANISHED_AFTER) == 1
    assert found(db, "beta") == [] and found(db, "alpha") == [A]
    assert store.delist_vanished(first + 20 * DAY) == 0  # once
    assert store.state_of(B) == ("done", None)  # its URL stays, revisited as before
    assert store.count_pages() == 2  # its row too, hash and text cleared
    seen = store.previous(B)
    assert seen is not None and seen.status == 20 and seen.content_hash is None
    assert seen.gone_at == first + VANISHED_AFTER  # gone when delisted, not again later

    # It answers again: the same body is indexed again, and its failures are over.
    assert store.revisit(first + 21 * DAY, everything=True) == 2
    index(store, B, "beta", first + 21 * DAY)
    assert found(db, "beta") == [B]
    assert failures(db, "b.test") == (0, None)


def test_nothing_vanishes_while_no_other_host_answers(
    store: CrawlStore, db: str, clock: Clock
) -> None:
    """A crawler that lost its own network sees every host fail: nothing leaves the
    index until some host answers after the first failure."""
    t0 = clock.now
    store.seed([A, B, C])
    index(store, A, "alpha", t0)
    index(store, B, "beta", t0 + 1)
    for k in range(2 * VANISHED_FAILURES):
        fail(store, A, t0 + 10 + k * DAY)
        fail(store, B, t0 + 10 + k * DAY)
    later = t0 + 30 * DAY
    assert store.delist_vanished(later) == 0
    assert found(db, "beta") == [B] and found(db, "alpha") == [A]
    store.log_fetch(request("gemini://c.test/robots.txt", later, 20))
    assert store.delist_vanished(later) == 2


def test_aliases_of_a_vanished_page_are_queued_again(
    store: CrawlStore, db: str, clock: Clock
) -> None:
    """A copy on another host takes over the body once its canonical page's host has
    vanished: the alias is queued again."""
    t0 = clock.now
    store.seed([B, C])
    index(store, B, "shared", t0)
    index(store, C, "shared", t0 + 1, duplicate_of=B)
    assert store.aliases(B) == [C]
    for k in range(VANISHED_FAILURES):
        fail(store, B, t0 + 10 + k * 2 * DAY)
    store.log_fetch(request(C + "robots.txt", t0 + 20 * DAY, 20))
    assert store.delist_vanished(t0 + 20 * DAY) == 1
    assert store.state_of(C) == ("queued", None)
    assert store.duplicate_of("h-shared", C) is None  # the vanished copy is no canonical
