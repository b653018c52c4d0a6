"""The portal's pages of what is new, through the ASGI application (httpx, no network):
/feeds, /new (and /new?q=), /newest and /random as HTML, every network text escaped, and
/new.atom a valid Atom 1.0 feed: the crawler's own feed reader reads it back, and it has
the elements RFC 4287 requires (feed id, title, updated, author; entry id, title,
updated, link)."""

from __future__ import annotations

from pathlib import Path
from xml.etree.ElementTree import fromstring

import httpx
import pytest
import trio
from whatsnew_db import ATOM, LOG, NOW, whatsnew_db

from geminibot.feeds.parse import read_feed
from geminibot.portal.app import PortalApp
from geminibot.portal.limits import PortalLimits
from geminibot.portal.upstream import Upstream, UpstreamGuard
from geminibot.why.reads import CheckReads

A = "{http://www.w3.org/2005/Atom}"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return whatsnew_db(tmp_path_factory.mktemp("portal") / "idx.db")


def get(db: str | None, path: str, **params: str) -> httpx.Response:
    async def main() -> httpx.Response:
        upstream = Upstream(PortalLimits(), guard=UpstreamGuard([], test_range=True))
        checks = None if db is None else CheckReads.of(db)
        app = PortalApp(upstream, checks=checks, wall_clock=lambda: NOW)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://portal.test") as web:
            return await web.get(path, params=params)

    return trio.run(main)


def test_feeds_page_lists_them_by_format_escaped(db: str) -> None:
    page = get(db, "/feeds")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<h2>atom (1)</h2>" in page.text and "<h2>gemsub (1)</h2>" in page.text
    assert "News &lt;&amp;&gt;" in page.text and "News <&>" not in page.text
    assert 'href="/gemini/news.test/atom.xml"' in page.text  # through the portal
    assert "\x1b" not in page.text and ">A [31mlog</a> · 3 entries" in page.text


def test_new_page_and_a_search_of_it(db: str) -> None:
    page = get(db, "/new")
    assert page.status_code == 200
    assert page.text.index("log.test/1.gmi") < page.text.index("log.test/2.gmi")
    assert "3.gmi" not in page.text  # older than a week
    basil = get(db, "/new", q="basil")
    assert "log.test/2.gmi" in basil.text and "log.test/1.gmi" not in basil.text


def test_new_atom_is_valid_atom(db: str) -> None:
    answer = get(db, "/new.atom")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/atom+xml; charset=utf-8"
    feed = read_feed(
        "http://portal.test/new.atom", answer.headers["content-type"], answer.content, NOW
    )
    assert feed is not None and feed.format == "atom"
    assert [e.url for e in feed.entries] == ["gemini://log.test/1.gmi", "gemini://log.test/2.gmi"]
    root = fromstring(answer.content)
    assert root.tag == f"{A}feed"
    for required in ("id", "title", "updated", "author/" + A + "name"):
        assert (root.findtext(A + required) or "").strip(), required
    for entry in root.iter(f"{A}entry"):
        for required in ("id", "title", "updated"):
            assert (entry.findtext(A + required) or "").strip(), required
        assert entry.find(f"{A}link").get("href", "").startswith("gemini://")  # type: ignore[union-attr]


def test_newest_and_random(db: str) -> None:
    newest = get(db, "/newest")
    assert "log.test" in newest.text and "news.test" not in newest.text
    assert "never.test" not in newest.text
    jump = get(db, "/random")
    assert jump.status_code == 303 and jump.headers["location"].startswith("/gemini/log.test/")


def test_about_links_them(db: str) -> None:
    about = get(db, "/about").text
    for path in ("/new", "/new.atom", "/feeds", "/newest", "/random"):
        assert f'href="{path}"' in about


def test_without_a_database_there_are_no_such_pages(tmp_path: Path) -> None:
    assert get(None, "/new").status_code != 200
    assert LOG and ATOM  # (the fixture's feeds)


def test_atom_holds_only_what_xml_can() -> None:
    from geminibot.portal.whatsnew import new_atom
    from geminibot.store.whatsnew import NewEntry

    hostile = NewEntry("gemini://a.test/x?\x01", "a\x01b\ud800c\x1b<&>", NOW, NOW, LOG)
    root = fromstring(new_atom([hostile], NOW))
    entry = root.find(f"{A}entry")
    assert entry is not None and entry.findtext(f"{A}title") == "a\ufffdb\ufffdc\ufffd<&>"
