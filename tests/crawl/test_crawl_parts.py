"""The crawl's pure parts, without trio, a server or a database: which hosts and links a
crawl takes (scope) and what it commits for an answer (the item pipeline: gone,
unchanged, duplicate, revisit, robots2 store)."""

from __future__ import annotations

from dataclasses import replace

from geminibot.crawl.page import extract
from geminibot.crawl.pipeline import PageAnswer, failed_revisit, page_item, refused_revisit
from geminibot.crawl.scope import CrawlScope
from geminibot.store.crawlstore import DecisionRecord, FetchRecord, HostState
from geminibot.store.freshness import (
    DAY,
    INITIAL_REVISIT,
    MIN_REVISIT,
    NOT_FOUND_DELIST_AFTER,
    NOT_FOUND_DELIST_MISSES,
    NOT_FOUND_FIRST,
    NOT_FOUND_MAX,
    RETRY_BASE,
    Visit,
    not_found_delay,
)

NOW = 1.7e9
URL = "gemini://a.test/page.gmi"


# -- scope --


def test_the_seeds_hosts_and_the_allowed_patterns_are_the_crawls() -> None:
    scope = CrawlScope(allow_hosts=("*.example.org",), exclude=("*/private/*",))
    kept = scope.add_seeds(["gemini://a.test/", "gemini://a.test/private/x.gmi"])
    assert kept == ["gemini://a.test/"]  # an excluded seed is not queued
    assert scope.host_allowed("a.test")
    assert scope.host_allowed("capsule.example.org")
    assert not scope.host_allowed("b.test")
    assert scope.excluded_by("gemini://a.test/private/y.gmi") == "*/private/*"
    assert scope.excluded_by("gemini://a.test/public.gmi") is None


def test_links_followed_are_the_crawls_protocols_hosts_and_not_excluded() -> None:
    scope = CrawlScope(allow_hosts=("b.test",), exclude=("*/private/*",))
    scope.add_seeds(["gemini://a.test/"])
    links = [
        "gemini://A.TEST:1965/x.gmi",  # normalised
        "gemini://b.test/y.gmi",
        "gemini://c.test/z.gmi",  # not the crawl's host
        "gemini://a.test/private/p.gmi",  # excluded
        "https://a.test/web.html",  # not a protocol of the crawl
        "mailto:someone@a.test",  # no protocol of any crawl
    ]
    assert scope.followed(links, 2, URL) == [
        ("gemini://a.test/x.gmi", 3, URL),
        ("gemini://b.test/y.gmi", 3, URL),
    ]
    followed = CrawlScope(follow=("http",))
    followed.add_seeds(["gemini://a.test/"])
    assert followed.followed(["https://a.test/web.html"], 0, URL) == [
        ("https://a.test/web.html", 1, URL)
    ]


# -- the item pipeline --


def answer(
    body: str,
    *,
    status: int = 20,
    previous: Visit | None = None,
    original: str | None = None,
    keeps_copies: bool = True,
    url: str = URL,
) -> PageAnswer:
    extracted = extract(url, "a.test", status, "text/gemini", body.encode(), NOW)
    decision = DecisionRecord(url, "a.test", True, "allowed", NOW)
    fetch = FetchRecord(
        url, "a.test", status, "text/gemini", None, NOW, 0.1, HostState(NOW, 0.1, 0, 0)
    )
    return PageAnswer(
        decision, fetch, extracted, "gemini", previous, original, keeps_copies, "indexer"
    )


def every_link(links: object) -> list[tuple[str, int, str]]:
    return [(link, 1, URL) for link in links]  # type: ignore[attr-defined]


def test_a_new_page_is_indexed_with_its_links_and_due_after_the_first_interval() -> None:
    item = page_item(answer("# Title\n=> /next.gmi\n"), NOW, every_link)
    assert not item.unchanged and not item.gone and item.demote is None
    assert item.page.title == "Title"
    assert list(item.links) == [("gemini://a.test/next.gmi", 1, URL)]
    assert item.revisit is not None and item.revisit.next_visit == NOW + INITIAL_REVISIT


def test_an_unchanged_page_queues_nothing_and_waits_twice_as_long() -> None:
    first = page_item(answer("# Same\n=> /next.gmi\n"), NOW, every_link)
    seen = Visit(20, first.page.content_hash, None, 2 * MIN_REVISIT, 0)
    item = page_item(answer("# Same\n=> /next.gmi\n", previous=seen), NOW, every_link)
    assert item.unchanged and list(item.links) == []
    assert item.revisit is not None and item.revisit.interval == 4 * MIN_REVISIT


def test_a_gone_page_leaves_the_index_and_is_not_revisited() -> None:
    item = page_item(answer("", status=52), NOW, every_link)
    assert item.gone and not item.not_found and list(item.links) == []
    assert item.revisit is not None and item.revisit.next_visit is None  # never due


def test_a_broken_link_is_not_found_not_gone_and_asked_again_in_a_day() -> None:
    item = page_item(answer("", status=51), NOW, every_link)
    assert item.not_found and not item.gone and not item.listed and list(item.links) == []
    assert item.page.gone_at is None  # never in the index: it did not go away
    assert item.revisit is not None and item.revisit.next_visit == NOW + NOT_FOUND_FIRST


def test_on_the_web_404_is_not_found_and_410_gone() -> None:
    def on_web(status: int) -> PageAnswer:
        gemini = answer("", status=status)
        return replace(gemini, protocol="http")

    assert page_item(on_web(404), NOW, every_link).not_found
    assert page_item(on_web(410), NOW, every_link).gone
    assert not page_item(on_web(51), NOW, every_link).not_found  # (a Gemini status)


def test_the_not_found_interval_grows_from_a_day_to_its_bound() -> None:
    delays = [not_found_delay(misses) for misses in range(1, 9)]
    assert delays == [DAY, 2 * DAY, 4 * DAY, 8 * DAY, 16 * DAY, 32 * DAY, 32 * DAY, 32 * DAY]
    assert NOT_FOUND_MAX == 32 * DAY and not_found_delay(10**9) == NOT_FOUND_MAX


def test_a_page_not_found_stays_in_the_index_until_it_stays_missing() -> None:
    live = Visit(20, "h", None, INITIAL_REVISIT, 0)
    first = page_item(answer("", status=51, previous=live), NOW, every_link)
    assert first.not_found and first.listed  # its last live answer stays searchable
    missing = Visit(20, "h", None, INITIAL_REVISIT, 0, misses=1, missing_since=NOW)
    before = NOT_FOUND_DELIST_MISSES - 1
    # The third answer in a row, but too soon: still listed (geminibot recheck cannot
    # take a page out by asking three times in a minute).
    soon = Visit(20, "h", None, INITIAL_REVISIT, 0, misses=before, missing_since=NOW)
    assert page_item(answer("", status=51, previous=soon), NOW + 60, every_link).listed
    second = page_item(answer("", status=51, previous=missing), NOW + DAY, every_link)
    assert second.listed and second.revisit is not None
    assert second.revisit.next_visit == NOW + DAY + 2 * DAY  # the interval grows
    later = NOW + NOT_FOUND_DELIST_AFTER
    out = page_item(answer("", status=51, previous=soon), later, every_link)
    assert out.not_found and not out.listed and not out.gone  # out of the index now
    assert out.page.gone_at == later and out.page.text is None
    back = page_item(answer("# Back\n", previous=soon), later, every_link)
    assert not back.not_found and not back.listed  # any other answer: live again


def test_a_page_changed_when_its_status_or_body_differs_and_gone_when_it_first_went() -> None:
    def fetched(text: str, previous: Visit | None, at: float, status: int = 20) -> Visit:
        page = page_item(answer(text, status=status, previous=previous), at, every_link).page
        return Visit(page.status, page.content_hash, None, None, 0, page.changed_at, page.gone_at)

    first = fetched("# One\n", None, NOW)
    assert (first.changed_at, first.gone_at) == (None, None)  # a first fetch is no change
    same = fetched("# One\n", first, NOW + 1)
    assert (same.changed_at, same.gone_at) == (None, None)
    changed = fetched("# Two\n", same, NOW + 2)
    assert (changed.changed_at, changed.gone_at) == (NOW + 2, None)
    gone = fetched("", changed, NOW + 3, status=52)
    assert (gone.changed_at, gone.gone_at) == (NOW + 2, NOW + 3)  # its last change kept
    still = fetched("", gone, NOW + 4, status=52)
    assert (still.changed_at, still.gone_at) == (NOW + 2, NOW + 3)  # gone since it first went
    back = fetched("# Two\n", still, NOW + 5)
    assert (back.changed_at, back.gone_at) == (NOW + 5, None)  # answering again is a change
    never = fetched("", Visit(None, None, None, None, 1), NOW + 6, status=52)
    assert (never.changed_at, never.gone_at) == (None, NOW + 6)  # a URL that failed before
    broken = fetched("", Visit(None, None, None, None, 1), NOW + 6, status=51)
    assert (broken.changed_at, broken.gone_at) == (None, None)  # not found: never went


def test_a_duplicate_under_a_longer_url_becomes_an_alias_of_the_canonical_one() -> None:
    longer = "gemini://a.test/copy/of/page.gmi"
    item = page_item(answer("# Twin\n=> /x.gmi\n", url=longer, original=URL), NOW, every_link)
    assert item.page.duplicate_of == URL and list(item.links) == [] and item.demote is None
    shorter = "gemini://a.test/p.gmi"
    item = page_item(answer("# Twin\n", url=shorter, original=URL), NOW, every_link)
    assert item.demote == URL and item.page.duplicate_of is None


def test_robots2_store_no_keeps_metadata_and_links_only() -> None:
    item = page_item(answer("# Secret\ntext\n=> /x.gmi\n", keeps_copies=False), NOW, every_link)
    assert item.page.title == "" and item.page.text is None and item.page.headings == ()
    assert list(item.links) == [("gemini://a.test/x.gmi", 1, URL)]


def test_refused_and_failed_urls_are_asked_again_later() -> None:
    assert refused_revisit(None, NOW).next_visit == NOW + INITIAL_REVISIT
    assert failed_revisit(None, NOW).next_visit == NOW + RETRY_BASE
    twice = Visit(None, None, None, None, 2)
    assert failed_revisit(twice, NOW).next_visit == NOW + 2 * RETRY_BASE
    given_up = Visit(None, None, None, None, 5)
    assert failed_revisit(given_up, NOW).next_visit is None
