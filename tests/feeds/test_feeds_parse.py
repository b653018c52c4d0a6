"""Feeds read from fetched documents: the four formats, and hostile feeds bounded."""

from __future__ import annotations

import calendar
import tracemalloc
from datetime import UTC, datetime

import pytest

from geminibot.feeds.parse import (
    FUTURE_SLACK,
    MAX_ENTRIES,
    MAX_FEED_BYTES,
    MAX_TITLE_CHARS,
    gemsub_entry,
    may_be_feed,
    read_feed,
)

NOW = calendar.timegm(datetime(2026, 12, 7, 18, 0, tzinfo=UTC).utctimetuple())
BASE = "gemini://feeds.test/gemlog/"


def noon(day: str) -> float:
    y, m, d = (int(x) for x in day.split("-"))
    return calendar.timegm(datetime(y, m, d, 12, tzinfo=UTC).utctimetuple())


GEMSUB = """\
# Alice's gemlog
## notes from the capsule

=> 2026-12-01-frost.gmi 2026-12-01 - First frost
=> /gemlog/2026-11-20.gmi 2026-11-20
=> talk.gmi 2026-11-15: A talk: on gardens
=> odd.gmi 2026-11-123 not an entry: a digit follows the date
=> undated.gmi About this gemlog
=> 2026-02-30.gmi 2026-02-30 no such day
=> gemini://other.test/post.gmi 2026-10-01 A post elsewhere
"""


def test_gemsub_entries_titles_and_dates() -> None:
    feed = read_feed(BASE, "text/gemini; charset=utf-8", GEMSUB.encode(), NOW)
    assert feed is not None
    assert feed.format == "gemsub"
    assert feed.title == "Alice's gemlog"
    assert feed.author is None
    assert [(e.url, e.title, e.published) for e in feed.entries] == [
        (BASE + "2026-12-01-frost.gmi", "First frost", noon("2026-12-01")),
        (BASE + "2026-11-20.gmi", "", noon("2026-11-20")),
        (BASE + "talk.gmi", "A talk: on gardens", noon("2026-11-15")),
        ("gemini://other.test/post.gmi", "A post elsewhere", noon("2026-10-01")),
    ]
    assert feed.updated == noon("2026-12-01")


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("2024-05-01 - Title", (noon("2024-05-01"), "Title")),
        ("2024-05-01 — Title", (noon("2024-05-01"), "Title")),
        ("2024-05-01Title", (noon("2024-05-01"), "Title")),
        ("2024-05-01", (noon("2024-05-01"), "")),
        ("2024-05-012 Title", None),
        ("2024-13-01 Title", None),
        ("Title 2024-05-01", None),
        ("24-05-01 Title", None),
    ],
)
def test_gemsub_label(label: str, expected: tuple[float, str] | None) -> None:
    assert gemsub_entry(label) == expected


def test_a_page_without_dated_links_is_no_feed() -> None:
    page = b"# Home\n=> about.gmi About\n=> 2026 in review\n"
    assert read_feed(BASE, "text/gemini", page, NOW) is None


ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Bob's <b>Atom</b> feed</title>
  <author><name>Bob</name></author>
  <entry><title>Second</title><link href="posts/2.gmi"/>
    <updated>2026-12-02T08:30:00Z</updated></entry>
  <entry><title>First</title><link rel="self" href="ignored"/>
    <link rel="alternate" href="gemini://feeds.test/posts/1.gmi"/>
    <published>2026-11-02T08:30:00+01:00</published></entry>
</feed>"""

RSS = b"""<?xml version="1.0"?>
<rss version="2.0"><channel><title>Carol's RSS</title>
<managingEditor>carol@feeds.test</managingEditor>
<item><title>Hello</title><link>gemini://feeds.test/rss/hello.gmi</link>
<pubDate>Tue, 01 Dec 2026 10:00:00 GMT</pubDate></item>
<item><title>No date</title><link>gemini://feeds.test/rss/nodate.gmi</link></item>
</channel></rss>"""

RDF = b"""<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
 xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
<channel><title>RSS one</title></channel>
<item><title>Old style</title><link>https://feeds.test/a</link>
<dc:date>2026-10-10T00:00:00Z</dc:date></item>
</rdf:RDF>"""

TWTXT = """\
# nick = dave
# url = gemini://feeds.test/twtxt.txt
2026-12-03T10:00:00Z\tmorning, see gemini://feeds.test/note.gmi for more
2026-12-04T11:00:00+02:00\tno link in this one
not a post line
"""


def test_atom() -> None:
    feed = read_feed(BASE + "atom.xml", "application/atom+xml", ATOM, NOW)
    assert feed is not None
    assert (feed.format, feed.title, feed.author) == ("atom", "Bob's Atom feed", "Bob")
    assert [(e.url, e.title) for e in feed.entries] == [
        (BASE + "posts/2.gmi", "Second"),
        ("gemini://feeds.test/posts/1.gmi", "First"),
    ]
    assert feed.entries[1].published == noon("2026-11-02") - 4.5 * 3600


def test_rss_two_and_one() -> None:
    feed = read_feed(BASE + "rss.xml", "application/rss+xml", RSS, NOW)
    assert feed is not None
    assert (feed.format, feed.title, feed.author) == ("rss", "Carol's RSS", "carol@feeds.test")
    assert [e.title for e in feed.entries] == ["Hello"]
    assert feed.skipped == 1
    rdf = read_feed(BASE + "index.rdf", "text/xml", RDF, NOW)
    assert rdf is not None and rdf.format == "rss" and rdf.title == "RSS one"
    assert [e.url for e in rdf.entries] == ["https://feeds.test/a"]


def test_twtxt() -> None:
    feed = read_feed("gemini://feeds.test/twtxt.txt", "text/plain", TWTXT.encode(), NOW)
    assert feed is not None
    assert (feed.format, feed.title, feed.author) == ("twtxt", "dave", "dave")
    assert [e.url for e in feed.entries] == [
        "gemini://feeds.test/note.gmi",
        "gemini://feeds.test/twtxt.txt#2026-12-04T11:00:00+02:00",
    ]
    assert may_be_feed("text/plain", "gemini://feeds.test/notes.txt") is False


def test_other_documents_are_not_parsed() -> None:
    assert read_feed(BASE, "image/png", b"\x89PNG", NOW) is None
    assert read_feed(BASE, "text/xml", b"<html><body/></html>", NOW) is None
    assert read_feed(BASE, "application/xml", b"<feed", NOW) is None


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<feed xmlns="http://www.w3.org/2005/Atom"><title>&lol3;</title></feed>"""

EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE feed [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<feed xmlns="http://www.w3.org/2005/Atom"><title>&x;</title></feed>"""


def test_entities_and_dtds_are_refused() -> None:
    assert read_feed(BASE, "application/atom+xml", BILLION_LAUGHS, NOW) is None
    assert read_feed(BASE, "application/atom+xml", EXTERNAL, NOW) is None


def entry_lines(first: int, count: int) -> str:
    """``count`` gemsub entries, each of its own page (``p{first}.gmi`` on)."""
    return "".join(f"=> p{i}.gmi 2026-01-01 post {i}\n" for i in range(first, first + count))


def test_hostile_feeds_are_bounded() -> None:
    tracemalloc.start()
    # twice the entries kept, text up to the byte bound, then a heading and more entries
    # just past it: neither is read
    head = entry_lines(0, 2 * MAX_ENTRIES)
    filler = "x" * (MAX_FEED_BYTES - len(head) - 1) + "\n"
    body = (head + filler + "# Past the bound\n" + entry_lines(2 * MAX_ENTRIES, 10)).encode()
    assert body.index(b"# Past") == MAX_FEED_BYTES
    feed = read_feed(BASE, "text/gemini", body, NOW)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert feed is not None and len(feed.entries) == MAX_ENTRIES and feed.truncated
    assert feed.title == "" and feed.entries[-1].url == f"{BASE}p{MAX_ENTRIES - 1}.gmi"
    assert peak < 40 * MAX_FEED_BYTES

    huge_title = b"# " + b"t" * 1_000_000 + b"\n=> a.gmi 2026-01-01 " + b"x" * 5000 + b"\n"
    feed = read_feed(BASE, "text/gemini", huge_title, NOW)
    assert feed is not None
    assert len(feed.title) == MAX_TITLE_CHARS and feed.title.endswith("…")
    assert len(feed.entries[0].title) == MAX_TITLE_CHARS

    future = b"=> a.gmi 9999-12-31 far future\n=> b.gmi 2026-12-08 tomorrow\n"
    feed = read_feed(BASE, "text/gemini", future, NOW)
    assert feed is not None and [e.title for e in feed.entries] == ["tomorrow"]
    assert feed.skipped == 1 and NOW < feed.entries[0].published <= NOW + FUTURE_SLACK

    big_xml = b"<rss><channel>" + b"<item/>" * (MAX_FEED_BYTES // 7 + 1) + b"</channel></rss>"
    assert read_feed(BASE, "application/rss+xml", big_xml, NOW) is None

    atom_dates = ATOM.replace(b"2026-12-02T08:30:00Z", b"99999-01-01T00:00:00Z")
    feed = read_feed(BASE, "application/atom+xml", atom_dates, NOW)
    assert feed is not None and len(feed.entries) == 1 and feed.skipped == 1
