"""Feeds in the crawl's item pipeline (pure): a page is read as a feed only where it may
be one; a feed's entries are followed as its links are; a feed that changed is revisited
sooner, down to FEED_MIN_REVISIT, and later while it stays the same."""

from __future__ import annotations

from geminibot.crawl.page import extract
from geminibot.crawl.pipeline import PageAnswer, page_item
from geminibot.store.crawlstore import DecisionRecord, FetchRecord, HostState
from geminibot.store.freshness import FEED_MIN_REVISIT, MIN_REVISIT, Visit

NOW = 1.75e9  # 2025-06-15
LOG = "gemini://a.test/log/"
GEMSUB = "# My log\n=> second.gmi 2024-05-02 Second\n=> first.gmi 2024-05-01 - First\n=> /about.gmi About\n"
ATOM = (
    '<feed xmlns="http://www.w3.org/2005/Atom"><title>Atomic</title>'
    '<entry><title>Far</title><link href="gemini://b.test/far.gmi"/>'
    "<updated>2024-05-03T10:00:00Z</updated></entry></feed>"
)


def answer(body: str, meta: str = "text/gemini", previous: Visit | None = None) -> PageAnswer:
    raw = body.encode()
    extracted = extract(LOG, "a.test", 20, meta, raw, NOW)
    decision = DecisionRecord(LOG, "a.test", True, "allowed", NOW)
    fetch = FetchRecord(LOG, "a.test", 20, meta, None, NOW, 0.1, HostState(NOW, 0.1, 0, 0))
    return PageAnswer(decision, fetch, extracted, "gemini", previous, None, True, "indexer", raw)


def every_link(links: object) -> list[tuple[str, int, str]]:
    return [(link, 1, LOG) for link in links]  # type: ignore[attr-defined]


def test_a_gemsub_page_is_read_as_a_feed_and_its_entries_followed() -> None:
    item = page_item(answer(GEMSUB), NOW, every_link)
    assert item.feed is not None and item.feed.format == "gemsub"
    assert [e.title for e in item.feed.entries] == ["Second", "First"]
    assert [link for link, _, _ in item.links] == [
        "gemini://a.test/log/second.gmi",
        "gemini://a.test/log/first.gmi",
        "gemini://a.test/about.gmi",
    ]


def test_a_page_without_a_dated_link_is_not_read() -> None:
    item = page_item(
        answer("# Plain\n=> /a.gmi About 2024-05-01\ntext 2024-05-01\n"), NOW, every_link
    )
    assert item.feed is None
    assert page_item(answer(ATOM, meta="image/png"), NOW, every_link).feed is None


def test_an_atom_feed_s_entries_are_queued_as_links() -> None:
    item = page_item(answer(ATOM, meta="application/atom+xml"), NOW, every_link)
    assert item.feed is not None and item.feed.title == "Atomic"
    assert [link for link, _, _ in item.links] == ["gemini://b.test/far.gmi"]


def test_a_changed_feed_is_revisited_sooner_down_to_its_floor() -> None:
    first = page_item(answer(GEMSUB), NOW, every_link)
    seen = Visit(20, "another body", None, 1.5 * FEED_MIN_REVISIT, 0, feed=True)
    changed = page_item(answer(GEMSUB, previous=seen), NOW, every_link)
    assert changed.revisit is not None and changed.revisit.interval == FEED_MIN_REVISIT
    assert FEED_MIN_REVISIT < MIN_REVISIT  # a plain page's floor is higher
    same = Visit(20, first.page.content_hash, None, FEED_MIN_REVISIT, 0, feed=True)
    unchanged = page_item(answer(GEMSUB, previous=same), NOW, every_link)
    assert unchanged.unchanged and unchanged.feed is None and unchanged.was_feed
    assert unchanged.revisit is not None and unchanged.revisit.interval == 2 * FEED_MIN_REVISIT
    plain = Visit(20, "another body", None, 1.5 * FEED_MIN_REVISIT, 0)
    page = page_item(answer("# Plain\n", previous=plain), NOW, every_link)
    assert page.revisit is not None and page.revisit.interval == MIN_REVISIT


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10 if n > 1 else "&lol;" * 10}">'
        for n in range(1, 10)
    )
    + ']><feed xmlns="http://www.w3.org/2005/Atom"><title>&lol9;</title></feed>'
)


def test_hostile_feeds_are_bounded_and_the_page_still_committed() -> None:
    laughs = page_item(answer(BILLION_LAUGHS, meta="application/atom+xml"), NOW, every_link)
    assert laughs.feed is None and laughs.revisit is not None  # refused, the page kept
    many = "# Many\n" + "".join(f"=> /p/{n}.gmi 2024-01-01 Post {n}\n" for n in range(50_000))
    item = page_item(answer(many), NOW, every_link)
    assert item.feed is not None and len(item.feed.entries) == 1000 and item.feed.truncated
    assert len(list(item.links)) <= 1000  # the entries are the links: no more queued
    future = "# Later\n=> /a.gmi 9999-12-31 Far away\n=> /b.gmi 2024-01-01 Fine\n"
    dated = page_item(answer(future), NOW, every_link).feed
    assert dated is not None and [e.title for e in dated.entries] == ["Fine"]
