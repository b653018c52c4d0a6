"""The shared test page builder (tests/pages.py)."""

from __future__ import annotations

from pages import FETCHED_AT, gemtext_page

from geminibot.store.pages import Link, Page


def test_gemtext_page_defaults_and_overrides() -> None:
    assert gemtext_page("gemini://a.test/x", "T", "four") == Page(
        url="gemini://a.test/x",
        host="a.test",
        status=20,
        meta="text/gemini",
        fetched_at=FETCHED_AT,
        size=4,
        mime="text/gemini",
        title="T",
        text="four",
    )
    links = (Link("gemini://b.test/", "b"),)
    page = gemtext_page("gemini://b.test/", text=None, fetched_at=5.0, links=links, size=9)
    assert (page.host, page.text, page.size, page.fetched_at, page.links) == (
        "b.test",
        None,
        9,
        5.0,
        links,
    )
