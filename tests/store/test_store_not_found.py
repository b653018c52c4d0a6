"""Not found is not gone, and looking again now, on both stores (SQLite, PostgreSQL): a
``51`` counts its misses and keeps a live page listed until it leaves the index; a link
met again makes a not-found URL due sooner; ``geminibot recheck``'s routine makes a URL or
a host's URLs due now (and nothing more), a gone one asked once more."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from store_helpers import LIMITS, Clock
from test_store import A, claim, decision, fetch, page

from geminibot.crawl.continuous import any_due
from geminibot.store.crawlstore import CrawlStore, FetchedPage, Revisit
from geminibot.store.database import Database, open_database
from geminibot.store.freshness import DAY, NOT_FOUND_FIRST
from geminibot.store.pages import Link
from geminibot.store.recheck import recheck

HOST = "a.test"


@pytest.fixture
def raw(db: str, store: CrawlStore) -> Iterator[Database]:
    """The store's database opened again (as ``geminibot recheck`` opens it), to read what
    the store keeps."""
    with open_database(db) as database:
        yield database


def row(raw: Database, url: str) -> tuple[Any, ...]:
    sql = "SELECT state, misses, missing_since, next_visit, updated_at FROM urls WHERE url = "
    mark = "?" if raw.dialect == "sqlite" else "%s"
    return tuple(raw.execute(sql + mark, (url,)).fetchone())


def one(raw: Database, sql: str) -> Any:
    return raw.execute(sql).fetchone()[0]


def answer(
    store: CrawlStore, url: str, status: int, clock: Clock, links: tuple[str, ...] = (), **kw: Any
) -> None:
    """Claim ``url`` and commit its answer (``kw``: the flags of :class:`FetchedPage`)."""
    claimed = claim(store)
    assert claimed is not None and claimed.url == url, claimed
    p = page(url, "Mayfly", "ephemeral mayfly", content_hash="h-live")
    p = replace(p, links=tuple(Link(t, "label") for t in links))
    if status != 20:
        p = replace(p, status=status, meta="not found", title="", text=None, content_hash=None)
    revisit = kw.pop("revisit", Revisit(clock.now + DAY, DAY))
    item = FetchedPage(
        decision(url), fetch(url), p, "indexer", [(t, 1, url) for t in links], revisit, **kw
    )
    store.fetched(item)


def test_a_51_counts_its_misses_keeps_the_page_listed_then_leaves_the_index(
    store: CrawlStore, raw: Database, clock: Clock
) -> None:
    store.seed([A])
    answer(store, A, 20, clock)
    total = one(raw, "SELECT urls_total FROM hosts")
    store.revisit(0.0, everything=True)
    answer(store, A, 51, clock, not_found=True, listed=True)
    state, misses, since, _, _ = row(raw, A)
    assert (state, misses, since) == ("not_found", 1, clock.now)
    assert store.state_of(A) == ("not_found", "status 51")
    # listed: its last live answer is still the page, searchable
    assert one(raw, "SELECT status FROM pages") == 20
    assert one(raw, "SELECT count(*) FROM pages WHERE text_indexed") == 1
    assert one(raw, "SELECT urls_total FROM hosts") == total  # still a live URL
    seen = store.previous(A)
    assert seen is not None and (seen.misses, seen.missing_since) == (1, clock.now)
    first = clock.now
    clock.now += 3 * DAY
    store.revisit(0.0, everything=True)
    answer(store, A, 51, clock, not_found=True)  # it stayed missing: out of the index
    assert row(raw, A)[:3] == ("not_found", 2, first)  # since the first miss
    assert one(raw, "SELECT status FROM pages") == 51
    assert one(raw, "SELECT count(*) FROM pages WHERE text_indexed") == 0
    store.revisit(0.0, everything=True)
    answer(store, A, 20, clock)  # back: the misses are over
    assert row(raw, A)[:3] == ("done", 0, None)


def test_a_failure_between_misses_keeps_them_and_gone_is_not_revisited(
    store: CrawlStore, raw: Database, clock: Clock
) -> None:
    store.seed([A, A + "g"])
    answer(store, A, 51, clock, not_found=True)
    store.revisit(0.0, everything=True)
    claimed = claim(store)
    assert claimed.url == A
    store.failed(decision(A), fetch(A, status=None), Revisit(clock.now + 60, None))
    assert row(raw, A)[:3] == ("failed", 1, clock.now)
    answer(store, A + "g", 52, clock, gone=True, revisit=Revisit(None, None))
    assert row(raw, A + "g")[0] == "gone" and row(raw, A + "g")[3] is None
    assert store.revisit(clock.now + 10 * DAY) == 1  # the failed URL; the gone one never


def test_a_link_met_again_makes_a_not_found_url_due_sooner(
    store: CrawlStore, raw: Database, clock: Clock
) -> None:
    broken = A + "broken.gmi"
    store.seed([A])
    answer(store, A, 20, clock, links=(broken,))
    answer(store, broken, 51, clock, not_found=True, revisit=Revisit(clock.now + 8 * DAY, DAY))
    last = row(raw, broken)[4]
    for hours, text in ((6, "changed"), (12, "changed again")):
        clock.now = last + hours * 3600
        recheck(raw, A, HOST, is_url=True, now=clock.now)  # its page fetched again...
        assert store.revisit_due(clock.now) == {HOST: 1}
        claimed = claim(store)
        assert claimed.url == A
        p = replace(page(A, "T", text, content_hash=f"h-{text}"), links=(Link(broken, "x"),))
        later = Revisit(clock.now + 30 * DAY, DAY)
        store.fetched(FetchedPage(decision(A), fetch(A), p, "indexer", [(broken, 1, A)], later))
        # ... has changed and still links to it: due a day after its last answer, not 8
        assert row(raw, broken)[:1] == ("not_found",)
        assert row(raw, broken)[3] == last + NOT_FOUND_FIRST
    assert not any_due(raw, last + NOT_FOUND_FIRST - 1) and any_due(raw, last + NOT_FOUND_FIRST)


def test_recheck_makes_a_url_or_a_hosts_urls_due_now_and_nothing_more(
    store: CrawlStore, raw: Database, clock: Clock
) -> None:
    long = A + "x" * (LIMITS.max_url_length - len(A) + 1)
    store.seed([A, A + "gone", A + "queued", long])
    answer(store, A, 20, clock)
    answer(store, A + "gone", 52, clock, gone=True, revisit=Revisit(None, None))
    total = one(raw, "SELECT urls_total FROM hosts")
    now = clock.now + 60
    assert not any_due(raw, now)

    done = recheck(raw, A, HOST, is_url=True, now=now)
    assert (done.known, done.due, done.waiting, done.kept_out) == (True, 1, 0, 0)
    assert row(raw, A)[:1] == ("done",) and row(raw, A)[3] == now  # due now, not queued
    assert any_due(raw, now) and not any_due(raw, now - 1)
    waiting = recheck(raw, A + "queued", HOST, is_url=True, now=now)
    assert (waiting.due, waiting.waiting) == (0, 1)
    unknown = recheck(raw, A + "never", HOST, is_url=True, now=now)
    assert not unknown.known and unknown.as_dict()["known"] is False

    every = recheck(raw, HOST, HOST, is_url=False, now=now)
    assert (every.due, every.waiting, every.kept_out) == (2, 1, 1)  # done+gone, queued, trap
    assert one(raw, "SELECT urls_total FROM hosts") == total + 1  # the gone URL: live again
    again = recheck(raw, HOST, HOST, is_url=False, now=now)
    assert again.due == 2 and one(raw, "SELECT urls_total FROM hosts") == total + 1  # once
    assert not recheck(raw, "b.test", "b.test", is_url=False, now=now).known
    # The crawl takes them as any URL due: queued (at the capsule's pace, by the crawl).
    assert store.revisit_due(now) == {HOST: 2}
    assert store.queued() == 3 and row(raw, A + "gone")[0] == "queued"
