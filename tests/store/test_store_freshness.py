"""The freshness part of the CrawlStore contract, on both stores (SQLite, PostgreSQL):
revisits when due, unchanged pages kept as they are, gone URLs out of the index and of the
per-host count, aliases under the canonical URL, logs pruned."""

from __future__ import annotations

from dataclasses import replace

from store_helpers import LIMITS
from test_store import A, claim, decision, fetch, page

from geminibot.store.crawlstore import CrawlStore, FetchedPage, Revisit
from geminibot.store.traps import CAP_REASON

DAY = 86_400.0


def visit(store: CrawlStore, url: str, text: str, **kw: object) -> dict[str, int]:
    claimed = claim(store)
    assert claimed is not None and claimed.url == url, claimed
    p = page(url, "T", text, content_hash=f"h-{text}")
    if kw.get("gone"):
        p = replace(p, status=52, meta="gone", text=None, content_hash=None)
    fields: dict[str, object] = {"revisit": Revisit(1_000_000.0 + DAY, DAY)} | kw
    return store.fetched(FetchedPage(decision(url), fetch(url), p, "indexer", [], **fields))  # type: ignore[arg-type]


def test_due_urls_come_back_and_unchanged_pages_stay(store: CrawlStore) -> None:
    store.seed([A])
    visit(store, A, "home")
    store.seed([A + "x"])
    visit(store, A + "x", "body")
    assert store.revisit(1_000_000.0 + DAY - 1) == 0
    assert store.revisit(1_000_000.0 + DAY) == 2
    assert store.queued() == 2
    seen = store.previous(A)
    assert seen is not None and seen.content_hash == "h-home" and seen.interval == DAY
    visit(store, A, "home", unchanged=True)
    visit(store, A + "x", "body", gone=True)
    assert store.state_of(A) == ("done", None)
    assert store.state_of(A + "x") == ("gone", "status 52")
    assert store.revisit(0.0, everything=True) == 1  # the gone URL never
    assert store.prune_logs(11.0) > 0  # every log row was written at 10 s


def test_a_better_named_copy_takes_over_as_canonical(store: CrawlStore) -> None:
    long, short = A + "copy.gmi?ref=1", A + "c"
    store.seed([long])
    visit(store, long, "same")
    store.seed([short])
    assert store.duplicate_of("h-same", short) == long
    claimed = claim(store)
    assert claimed.url == short
    p = page(short, "T", "same", content_hash="h-same")
    store.fetched(FetchedPage(decision(short), fetch(short), p, "indexer", [], demote=long))
    assert store.aliases(short) == [long]
    assert store.duplicate_of("h-same", long) == short


def test_attempts_count_failures_in_a_row_and_an_answer_resets_them(store: CrawlStore) -> None:
    """One counter (``urls.attempts``): a request sent counts an attempt, a failed one
    keeps it (the retry back-off grows with it), a release gives back only what its
    request counted, an answer sets it to 0."""
    store.seed([A])
    for n in (1, 2):
        assert claim(store).url == A
        assert store.hold_host("a.test", "me", A)
        store.failed(decision(A), fetch(A, status=None), Revisit(0.0))
        seen = store.previous(A)
        assert seen is not None and seen.attempts == n
        store.release_host("a.test", "me")
        assert store.revisit(0.0) == 1
    assert claim(store).url == A
    store.release(A)  # unsent (an interrupted run): not an attempt
    seen = store.previous(A)
    assert seen is not None and seen.attempts == 2
    store.release_host("a.test", "me")
    visit(store, A, "home")
    seen = store.previous(A)
    assert seen is not None and seen.attempts == 0


def test_urls_are_normalised_before_the_frontier(store: CrawlStore) -> None:
    """Seeds (and links) naming one resource are one row, queued once, on both stores."""
    got = store.seed(["GEMINI://A.test:1965", "gemini://a.test/x/../", A + "1", A + "1"])
    assert got == {
        "GEMINI://A.test:1965": "queued",
        "gemini://a.test/x/../": "known",  # another name of the URL met just before
        A + "1": "known",  # (met twice: the second time, it is known)
    }
    store.seed([A])
    assert store.queued() == 2
    assert store.state_of(A) == ("queued", None)


def test_a_capped_url_is_queued_once_its_host_has_room(store: CrawlStore) -> None:
    """The per-host cap counts live URLs: a URL it trapped is queued when met again after
    one of the host's URLs is gone (SQLite and PostgreSQL alike)."""
    cap = LIMITS.max_urls_per_host
    first = [f"{A}{i}" for i in range(cap)]
    store.seed([A, *first[1:]])
    late = A + "late"
    assert store.seed([late]) == {late: f"trapped: more than {cap}{CAP_REASON}"}
    assert store.seed([late]) == {late: "known"}  # still no room
    visit(store, A, "home", gone=True)  # one live URL fewer
    woken = visit_with_links(store, first[1], [late, first[2]])
    assert woken == {"a.test": 1}
    assert store.state_of(late) == ("queued", None)
    assert store.seed([A + "later"]) == {A + "later": f"trapped: more than {cap}{CAP_REASON}"}


def test_trap_decisions_follow_the_order_the_urls_are_met(store: CrawlStore) -> None:
    """Beyond the cap, the URLs met first are the ones queued (and claimed first)."""
    cap = LIMITS.max_urls_per_host
    met = [f"{A}{i}" for i in range(cap, -1, -1)]  # 6, 5, ..., 0: not in sorted order
    got = store.seed(met)
    assert [got[u] for u in met] == ["queued"] * cap + [f"trapped: more than {cap}{CAP_REASON}"]
    assert claim(store).url == met[0]


def test_discovered_links_are_normalised_before_the_frontier(store: CrawlStore) -> None:
    store.seed([A])
    woken = visit_with_links(store, A, ["GEMINI://A.test:1965/x", "gemini://a.test/y/../x"])
    assert woken == {"a.test": 1}
    assert store.state_of(A + "x") == ("queued", None)
    assert store.queued() == 1


def visit_with_links(store: CrawlStore, url: str, links: list[str]) -> dict[str, int]:
    claimed = claim(store)
    assert claimed is not None and claimed.url == url, claimed
    p = page(url, "T", f"text of {url}", content_hash=f"h-{url}")
    return store.fetched(
        FetchedPage(decision(url), fetch(url), p, "indexer", [(t, 1, url) for t in links])
    )
