"""The CrawlStore contract, on both stores (``store`` is parametrised: SQLite and
PostgreSQL). What one store does, the other must do: the crawl loop cannot tell them apart."""

from __future__ import annotations

from typing import Any

from store_helpers import LIMITS, Clock

from geminibot.policy import FetchOutcome
from geminibot.store.crawlstore import (
    CachedFile,
    CrawlStore,
    DecisionRecord,
    FetchedPage,
    FetchRecord,
    HostState,
    cache_expiry,
)
from geminibot.store.pages import Link, Page

A, B = "gemini://a.test/", "gemini://b.test/"


def fetch(url: str, host: str = "a.test", status: int | None = 20, at: float = 10.0) -> FetchRecord:
    state = HostState(last_end=at + 0.5, last_duration=0.5, not_before=at + 2, slow_downs=1)
    return FetchRecord(url, host, status, "text/gemini", None, at, 0.5, state)


def decision(url: str, allowed: bool = True, host: str = "a.test") -> DecisionRecord:
    return DecisionRecord(url, host, allowed, "because", 10.0)


def page(url: str, title: str, text: str | None, **kw: Any) -> Page:
    return Page(
        url=url,
        host="a.test",
        status=20,
        meta="text/gemini",
        fetched_at=10.0,
        size=len(text or ""),
        mime="text/gemini",
        content_hash=kw.pop("content_hash", f"h-{url}"),
        title=title,
        text=text,
        **kw,
    )


def claim(store: CrawlStore, host: str = "a.test") -> Any:
    """A worker's claim: its host leased first, as the crawl loop does."""
    assert store.lease_host(host, "me") is not None
    return store.claim(host, "me")


def commit(
    store: CrawlStore, url: str, title: str, text: str | None, links: list[str]
) -> dict[str, int]:
    claimed = claim(store)
    assert claimed is not None and claimed.url == url
    p = page(url, title, text, links=tuple(Link(t, "label") for t in links))
    return store.fetched(
        FetchedPage(decision(url), fetch(url), p, "indexer", [(t, 1, url) for t in links])
    )


def test_settings_are_kept_and_checked(store: CrawlStore) -> None:
    assert store.check_settings({"role": "indexer", "agent": "geminibot"}) is None
    assert store.check_settings({"role": "indexer", "agent": "geminibot"}) is None
    assert store.check_settings({"role": "archiver"}) == ("role", "indexer", "archiver")


def test_seed_queues_once_and_traps_at_the_bounds(store: CrawlStore) -> None:
    long = "gemini://a.test/" + "x" * (LIMITS.max_url_length - len("gemini://a.test/") + 1)
    edge = long[:-1]
    got = store.seed([A, A + "p", long, edge])
    assert got[A] == got[A + "p"] == got[edge] == "queued"
    assert got[long].startswith("trapped: URL longer than")
    assert store.seed([A]) == {A: "known"}
    assert store.queued() == 3
    assert store.count_hosts() == 1
    assert store.state_of(long) == ("trapped", f"URL longer than {LIMITS.max_url_length} bytes")
    assert store.state_of("gemini://never.test/") is None


def test_query_and_host_bounds(store: CrawlStore) -> None:
    got = store.seed([f"{A}q?{i}" for i in range(3)])
    assert [got[f"{A}q?{i}"] for i in range(3)] == ["queued", "queued", got[f"{A}q?2"]]
    assert got[f"{A}q?2"] == "trapped: more than 2 query strings on the path"
    more = store.seed([f"{A}{i}" for i in range(6)])
    assert list(more.values()).count("queued") == LIMITS.max_urls_per_host - 2
    assert store.queued() == LIMITS.max_urls_per_host


def test_claim_in_order_release_and_recover(store: CrawlStore) -> None:
    store.seed([A, A + "1", B])
    assert list(store.hosts_with_work()) == ["a.test", "b.test"]
    assert store.hosts_with_work() == {"a.test": 2, "b.test": 1}  # oldest first, counted
    first = claim(store)
    assert first is not None and (first.url, first.depth) == (A, 0)
    assert store.leased() == [A]
    assert store.state_of(A) == ("leased", None)
    store.release(A)
    assert store.state_of(A) == ("queued", None)
    again = claim(store)
    assert again is not None and again.url == A
    second = claim(store)
    assert second is not None and second.url == A + "1"
    assert claim(store) is None
    store.release_host("a.test", "me")  # its holder is gone (ended, or its lease expired)
    assert store.recover() == 2  # a killed run's claims go back to the queue
    assert store.queued() == 3 and store.leased() == []


def test_fetched_commits_page_links_and_frontier(store: CrawlStore) -> None:
    store.seed([A])
    woken = commit(
        store, A, "Home", "a polite crawler", [A + "x", B, A, "gemini://a.test/" + "y" * 99]
    )
    assert woken == {"a.test": 1, "b.test": 1}
    assert store.state_of(A) == ("done", None)
    assert store.state_of(B) == ("queued", None)
    assert store.state_of(A + "x") == ("queued", None)
    assert store.state_of("gemini://a.test/" + "y" * 99) == (
        "trapped",
        f"URL longer than {LIMITS.max_url_length} bytes",
    )
    assert store.count_pages() == 1
    assert store.count_hosts() == 2
    states = store.host_states()
    assert states["a.test"] == HostState(10.5, 0.5, 12.0, 1)
    assert states["b.test"] == HostState(None, 0.0, 0.0, 0)


def test_depth_bound_on_links(store: CrawlStore) -> None:
    store.seed([A])
    assert claim(store) is not None
    deep = [(A + "deep", LIMITS.max_depth + 1, A), (A + "ok", LIMITS.max_depth, A)]
    store.fetched(FetchedPage(decision(A), fetch(A), page(A, "", "x"), "indexer", deep))
    assert store.state_of(A + "ok") == ("queued", None)
    assert store.state_of(A + "deep") == ("trapped", f"deeper than {LIMITS.max_depth} links")


def test_duplicates_refusals_failures_slow_downs(store: CrawlStore) -> None:
    store.seed([A, A + "1", A + "2", A + "3"])
    commit(store, A, "Home", "text", [])
    assert store.duplicate_of(f"h-{A}", A + "1") == A
    assert store.duplicate_of(f"h-{A}", A) is None
    assert claim(store) is not None
    store.refused(decision(A + "1", allowed=False))
    assert store.state_of(A + "1") == ("refused", "because")
    assert claim(store) is not None
    store.failed(decision(A + "2"), fetch(A + "2", status=None))
    assert store.state_of(A + "2") == ("failed", None)
    assert claim(store) is not None
    store.slowed_down(fetch(A + "3", status=44))
    assert store.state_of(A + "3") == ("queued", None)
    store.log_fetch(fetch(A + "3", status=None, at=20.0))
    assert store.host_states()["a.test"].last_end == 20.5


def test_policy_file_cache(store: CrawlStore) -> None:
    store.seed([A])
    outcome = FetchOutcome("ok", "200 OK", None, 3600.0)
    cached = CachedFile("a.test", "robots.txt", outcome, 20, b"User-agent: *\n", 100.0, 0.0)
    cached = CachedFile(**{**cached.__dict__, "expires_at": cache_expiry(100.0, outcome)})
    store.save_policy_file(cached, fetch(A + "robots.txt"))
    got = store.load_policy_file("a.test", "robots.txt", 200.0)
    assert got is not None
    assert (got.outcome.kind, got.outcome.reason, got.status, got.body) == (
        "ok",
        "200 OK",
        20,
        b"User-agent: *\n",
    )
    assert got.fetched_at == 100.0 and got.expires_at == cached.expires_at
    assert store.load_policy_file("a.test", "robots.txt", cached.expires_at) is None
    assert store.load_policy_file("a.test", "agents.txt", 200.0) is None
    newer = CachedFile("a.test", "robots.txt", outcome, 20, None, 300.0, 5000.0)
    store.save_policy_file(newer, fetch(A + "robots.txt"))
    again = store.load_policy_file("a.test", "robots.txt", 400.0)
    assert again is not None and again.body is None and again.fetched_at == 300.0


def test_skip_is_cleared_by_the_next_run(store: CrawlStore, clock: Clock) -> None:
    store.seed([A])
    store.skip_host("a.test", "robots.txt unreachable")
    store.host_states()
    assert list(store.hosts_with_work()) == ["a.test"]


def test_certificate_pins_are_kept(store: CrawlStore) -> None:
    assert store.pin("a.test", 1965) is None
    store.set_pin("a.test", 1965, "sha256:one", 5.0)
    store.set_pin("a.test", 1966, "sha256:other", 5.0)
    assert store.pin("a.test", 1965) == "sha256:one"
    store.set_pin("a.test", 1965, "sha256:two", 6.0)  # replaced (the user trusted it)
    assert store.pin("a.test", 1965) == "sha256:two"
    assert store.pin("a.test", 1966) == "sha256:other"
    assert store.pin("b.test", 1965) is None


def test_fetched_counts_the_urls_queued_per_host(store: CrawlStore) -> None:
    store.seed([A])
    woken = commit(store, A, "Home", "text", [A + "1", A + "2", A + "1", B, A])
    assert woken == {"a.test": 2, "b.test": 1}
