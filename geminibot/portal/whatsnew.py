"""The portal's pages of what is new (docs/feeds.md), from a crawl database: the search
capsule's ``/feeds``, ``/new`` (``/new?q=QUERY``), ``/newest`` and ``/random`` as HTML,
and ``/new.atom``, the week's entries as an Atom 1.0 feed (RFC 4287) for web feed
readers (:class:`WhatsNew` answers them). Each is one read of the database (a
:class:`~geminibot.store.database.Database` of either engine), run off the event loop on
the reads of ``/check``; every text from the network is escaped
(:func:`~geminibot.portal.render.esc`; the Atom document is written by ElementTree).

The spans and bounds are those of :mod:`geminibot.store.whatsnew`, shared with the
search capsule.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import parse_qs
from xml.etree.ElementTree import Element, SubElement, tostring

from geminibot import __version__
from geminibot.index import QueryError
from geminibot.index.search_cli import search_function
from geminibot.portal.pages import HTTPResponse, Pages
from geminibot.portal.render import esc, notice
from geminibot.store.database import Database
from geminibot.store.reads import Reads, ReadsBusy
from geminibot.store.whatsnew import (
    FEEDS_LISTED,
    NEW_MATCHES,
    NEWEST_LISTED,
    NEWEST_SPAN,
    NewEntry,
    feed_formats,
    known_feeds,
    newest_hosts,
    random_live_page,
)
from geminibot.store.whatsnew import week as week_of
from geminibot.urls import InvalidURL, host_key, host_url
from geminibot.why.render import one_line

#: Longest title shown, in characters.
MAX_TITLE = 200
#: The Atom feed's id (a stable IRI: the portal may be reached by several names).
ATOM_ID = "urn:geminibot:portal:new"
ATOM_NS = "http://www.w3.org/2005/Atom"
ATOM_TYPE = b"application/atom+xml; charset=utf-8"

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

Href = Callable[[str], str | None]
#: A page: its title and its body (HTML, escaped).
Html = tuple[str, str]


def day(when: float | None) -> str:
    return "-" if when is None else datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d")


def _capsule(url: str) -> str:
    try:
        return host_key(url)
    except InvalidURL:
        return ""


def _link(url: str, text: str, href: Href) -> str:
    """A link to ``url`` (through the portal where it can be) named ``text`` (one line,
    control characters folded, escaped)."""
    return f'<a href="{esc(href(url) or url)}">{esc(one_line(text, MAX_TITLE) or url)}</a>'


def feeds_html(database: Database, href: Href) -> Html:
    """/feeds: the known feeds by format, latest entry first in each."""
    counts = feed_formats(database)
    feeds = known_feeds(database, FEEDS_LISTED)
    parts = ["<h1>Known feeds</h1>"]
    if not feeds:
        parts.append("<p>The crawl has found no feed yet.</p>")
    for fmt in sorted({f.format for f in feeds}):
        parts.append(f"<h2>{esc(fmt)} ({counts.get(fmt, 0)})</h2>\n<ul>")
        for feed in (f for f in feeds if f.format == fmt):
            note = f"{feed.entries} entries, latest {day(feed.last_entry)}"
            parts.append(f"<li>{_link(feed.url, feed.title, href)} · {note}</li>")
        parts.append("</ul>")
    parts.append('<p><a href="/new">What is new</a> · <a href="/new.atom">Atom feed</a></p>')
    return "Known feeds", "\n".join(parts)


def week(database: Database, now: float, query: str | None = None) -> list[NewEntry]:
    """The entries of the past week, newest first (``query``: only those whose page the
    search finds); raises :class:`~geminibot.index.QueryError` for a query that is none."""
    if query is None:
        return week_of(database, now)
    found = search_function(database)(database.connection, query, NEW_MATCHES)
    return week_of(database, now, {result.url for result in found})


def new_html(entries: list[NewEntry], href: Href, query: str | None) -> Html:
    """/new: the week's entries, newest first."""
    title = "What is new" if query is None else f"What is new: {one_line(query, 100)}"
    parts = [
        f"<h1>{esc(title)}</h1>",
        '<form action="/new" method="get"><input name="q" aria-label="Search"'
        f' value="{esc(query or "")}"> <button>Only matching pages</button></form>',
    ]
    if not entries:
        parts.append("<p>Nothing new this week.</p>")
    else:
        parts.append("<ul>")
        for e in entries:
            capsule = esc(_capsule(e.url))
            parts.append(f"<li>{day(e.published)} {_link(e.url, e.title, href)} ({capsule})</li>")
        parts.append("</ul>")
    parts.append('<p><a href="/new.atom">Subscribe (Atom)</a> · <a href="/feeds">Known feeds</a>')
    parts.append(' · <a href="/newest">New capsules</a></p>')
    return title, "\n".join(parts)


def newest_html(database: Database, now: float, href: Href) -> Html:
    """/newest: the capsules first seen in the last 30 days."""
    hosts = newest_hosts(database, now - NEWEST_SPAN, NEWEST_LISTED)
    parts = ["<h1>New capsules</h1>", "<p>Capsules the crawl first met in the last 30 days.</p>"]
    if not hosts:
        parts.append("<p>None lately.</p>")
    else:
        parts.append("<ul>")
        for host, first_seen, pages in hosts:
            link = _link(host_url(host), host, href)
            parts.append(f"<li>{link}: first seen {day(first_seen)}, {pages} pages</li>")
        parts.append("</ul>")
    return "New capsules", "\n".join(parts)


def _xml_text(text: str) -> str:
    """``text`` without what XML 1.0 cannot hold (most C0 controls, lone surrogates,
    U+FFFE and U+FFFF): each becomes U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def _stamp(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_atom(entries: list[NewEntry], now: float) -> bytes:
    """The week's entries as an Atom 1.0 document: each entry's id and link its URL, its
    title (its capsule when it has none) and its date."""
    feed = Element("feed", xmlns=ATOM_NS)
    SubElement(feed, "id").text = ATOM_ID
    SubElement(feed, "title").text = "What is new in Geminispace"
    latest = max((e.published for e in entries), default=now)
    SubElement(feed, "updated").text = _stamp(latest)
    SubElement(SubElement(feed, "author"), "name").text = "geminibot"
    SubElement(feed, "generator", version=__version__).text = "geminibot"
    SubElement(feed, "link", rel="self", href="/new.atom")
    for e in entries:
        entry = SubElement(feed, "entry")
        SubElement(entry, "id").text = _xml_text(e.url)
        SubElement(entry, "title").text = _xml_text(e.title or _capsule(e.url) or e.url)
        SubElement(entry, "updated").text = _stamp(e.published)
        SubElement(entry, "link", rel="alternate", href=_xml_text(e.url))
    document: bytes = tostring(feed, encoding="utf-8", xml_declaration=True)
    return document


class WhatsNew:
    """The portal's pages of what is new, read off the event loop on ``reads`` (a 503
    page when no read slot is free in time); ``wall_clock``: the time "the past week"
    ends at."""

    PATHS = ("/feeds", "/new", "/new.atom", "/newest", "/random")

    def __init__(
        self,
        pages: Pages,
        reads: Reads,
        wall_clock: Callable[[], float],
        pick: Callable[[int, int], int] = random.randint,
    ) -> None:
        self.pages = pages
        self.reads = reads
        self.wall_clock = wall_clock
        self.pick = pick

    async def answer(self, path: str, query: str | None) -> HTTPResponse:
        """The page at ``path`` (one of :data:`PATHS`), ``query`` the request's."""
        now = self.wall_clock()
        asked = parse_qs(query or "").get("q", [""])[0].strip() or None
        try:
            answer: HTTPResponse = await self.reads.run(
                lambda database: self._read(path, asked, database, now)
            )
            return answer
        except ReadsBusy as exc:
            wait = f"Try again in {exc.retry_after} seconds."
            return self.pages.html(
                503, "Please wait", notice("Please wait", [esc(str(exc)), wait]),
                retry_after=exc.retry_after,
            )  # fmt: skip

    def _read(self, path: str, query: str | None, database: Database, now: float) -> HTTPResponse:
        href = self.pages.href
        if path == "/feeds":
            return self.pages.html(200, *feeds_html(database, href))
        if path == "/newest":
            return self.pages.html(200, *newest_html(database, now, href))
        if path == "/random":
            url = random_live_page(database, self.pick)
            if url is None:
                return self.pages.html(404, "Nothing yet", notice("Nothing yet", ["No page yet."]))
            where = href(url) or url
            return HTTPResponse(303, b"", [(b"location", where.encode("ascii", "replace"))])
        try:
            entries = week(database, now, None if path == "/new.atom" else query)
        except QueryError as exc:
            return self.pages.html(
                400, "Cannot search that", notice("Cannot search that", [esc(str(exc))])
            )
        if path == "/new.atom":
            return HTTPResponse(200, new_atom(entries, now), [(b"content-type", ATOM_TYPE)])
        return self.pages.html(200, *new_html(entries, href, query))
