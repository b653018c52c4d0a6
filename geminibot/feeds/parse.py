"""Feeds: which fetched documents are feeds, and their entries (pure: bytes in, a Feed out).

Four formats, each told by its MIME type and its content:

- ``gemsub``: a ``text/gemini`` page read by the companion specification "Subscribing to
  Gemini pages": each link line whose label's first ten characters are a date
  ``YYYY-MM-DD`` (not followed by a digit) is an entry, dated noon UTC of that day, titled
  by the rest of its label after the date and any separator (``2024-05-01 - Title``);
  the feed's title is the first ``#`` heading. A page with no entry is not a feed.
- ``atom`` (RFC 4287) and ``rss`` (2.0, and 1.0's RDF): XML, parsed with defusedxml,
  which refuses a DTD, entity declarations and external references outright (so no
  billion laughs and no external entity reaches a parser).
- ``twtxt``: ``text/plain`` lines ``TIMESTAMP<TAB>TEXT`` (RFC 3339 timestamps) with
  ``# key = value`` metadata; an entry's URL is the first URL its text holds, else the
  feed's URL with the timestamp as fragment.

Every bound below is named: a feed is read from at most :data:`MAX_FEED_BYTES`, keeps
at most :data:`MAX_ENTRIES` entries (in document order; ``truncated`` says so),
titles and authors are cut to :data:`MAX_TITLE_CHARS`, an entry URL longer than
:data:`MAX_URL_CHARS` or dated before 1970 or more than :data:`FUTURE_SLACK` seconds
after the fetch is skipped (``skipped`` counts them). Nothing here raises on content.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Literal
from xml.etree.ElementTree import Element

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

from geminibot.gemini.gemtext import HeadingLine, LinkLine, iter_gemtext
from geminibot.urls import InvalidURL, normalise, resolve_reference

FeedFormat = Literal["gemsub", "atom", "rss", "twtxt"]
FORMATS: tuple[FeedFormat, ...] = ("gemsub", "atom", "rss", "twtxt")

#: The most of a document read as a feed; an XML feed larger than this is not parsed.
MAX_FEED_BYTES = 1024 * 1024
#: The most entries kept of one feed, in document order.
MAX_ENTRIES = 1000
#: Feed titles, entry titles and authors are cut to this many characters (with "…").
MAX_TITLE_CHARS = 200
#: An entry whose URL is longer is skipped (Gemini's own request limit is 1024 bytes).
MAX_URL_CHARS = 1024
#: An entry dated more than this many seconds after the fetch is skipped.
FUTURE_SLACK = 2 * 86400

XML_TYPES = frozenset(
    {"application/atom+xml", "application/rss+xml", "application/rdf+xml",
     "application/xml", "text/xml"}
)  # fmt: skip
ATOM = "{http://www.w3.org/2005/Atom}"
RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
RSS1 = "{http://purl.org/rss/1.0/}"
DC = "{http://purl.org/dc/elements/1.1/}"

_GEMSUB_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?!\d)")
_SEPARATORS = " \t-–—:|·"
_URL_IN_TEXT = re.compile(r"\b(?:gemini|https?)://[^\s<>\"')\]]+")


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a feed: its page's URL (absolute), title (may be empty) and date."""

    url: str
    title: str
    published: float
    """Seconds since the epoch, UTC."""


@dataclass(frozen=True, slots=True)
class Feed:
    """A document read as a feed."""

    format: FeedFormat
    title: str
    author: str | None
    entries: tuple[Entry, ...]
    truncated: bool = False
    """More entries than :data:`MAX_ENTRIES`: only the first were kept."""
    skipped: int = 0
    """Entries left out for a bad URL or a date out of range."""

    @property
    def updated(self) -> float | None:
        """The feed's time: its latest entry's."""
        return max((e.published for e in self.entries), default=None)


def media_type(mime: str | None) -> str:
    """The bare media type of a MIME header value, lower case (``''`` when none)."""
    return (mime or "").split(";", 1)[0].strip().lower()


def may_be_feed(mime: str | None, url: str) -> bool:
    """Whether a document of this type could be a feed at all: the crawl parses no other."""
    kind = media_type(mime)
    if kind in XML_TYPES or kind == "text/gemini":
        return True
    return kind == "text/plain" and url.rsplit("/", 1)[-1].lower().endswith("twtxt.txt")


def worth_reading(mime: str | None, url: str, labels: Iterable[str]) -> bool:
    """Whether a fetched page is worth :func:`read_feed`: it may be a feed by its type
    and, gemtext, one of its link ``labels`` starts with a date (a page without one is no
    gemsub feed: the crawl then parses nothing more of it)."""
    if not may_be_feed(mime, url):
        return False
    if media_type(mime) != "text/gemini":
        return True
    return any(_GEMSUB_DATE.match(label) for label in labels)


def read_feed(url: str, mime: str | None, body: bytes, now: float) -> Feed | None:
    """The feed this document is, or None: ``url`` is where it was fetched (entries resolve
    against it), ``now`` the fetch time (entries dated far after it are skipped)."""
    if not may_be_feed(mime, url):
        return None
    kind = media_type(mime)
    if kind in XML_TYPES:
        return _xml_feed(url, body, now) if len(body) <= MAX_FEED_BYTES else None
    text = body[:MAX_FEED_BYTES].decode("utf-8", "replace")
    if kind == "text/gemini":
        return _gemsub(url, text, now)
    return _twtxt(url, text, now)


def clip(text: str, limit: int = MAX_TITLE_CHARS) -> str:
    """``text`` with runs of white space folded, cut to ``limit`` characters with "…"."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


class _Entries:
    """Entries gathered under the bounds: one per URL (the first), at most MAX_ENTRIES."""

    def __init__(self, base: str, now: float) -> None:
        self.base = base
        self.latest = now + FUTURE_SLACK
        self.kept: dict[str, Entry] = {}
        self.truncated = False
        self.skipped = 0

    def add(self, href: str, title: str, published: float | None) -> None:
        if len(self.kept) >= MAX_ENTRIES:
            self.truncated = True
            return
        url = self._absolute(href)
        if url is None or published is None or not 0 <= published <= self.latest:
            self.skipped += 1
            return
        self.kept.setdefault(url, Entry(url, clip(title), published))

    def _absolute(self, href: str) -> str | None:
        """``href`` resolved against the feed and normalised (a fragment-only reference
        keeps its fragment: twtxt's posts); None for a URL the crawl could not fetch."""
        href = href.strip()
        if not href or len(href) > MAX_URL_CHARS:
            return None
        try:
            url = normalise(resolve_reference(self.base, href))
        except InvalidURL:
            return None
        if href.startswith("#"):
            url += href
        return url if len(url) <= MAX_URL_CHARS else None

    def feed(self, fmt: FeedFormat, title: str, author: str | None) -> Feed:
        return Feed(
            fmt,
            clip(title),
            clip(author) if author else None,
            tuple(self.kept.values()),
            self.truncated,
            self.skipped,
        )


def _noon_utc(year: int, month: int, day: int) -> float | None:
    try:
        return calendar.timegm(datetime(year, month, day, 12, tzinfo=UTC).utctimetuple())
    except ValueError:
        return None


def gemsub_entry(label: str) -> tuple[float, str] | None:
    """A gemsub link label's date (noon UTC) and title, or None when it is no entry."""
    match = _GEMSUB_DATE.match(label)
    if match is None:
        return None
    published = _noon_utc(*(int(g) for g in match.groups()))
    if published is None:
        return None
    return published, label[match.end() :].lstrip(_SEPARATORS).strip()


def _gemsub(url: str, text: str, now: float) -> Feed | None:
    entries = _Entries(url, now)
    title = ""
    for line in iter_gemtext(text, url):
        if isinstance(line, HeadingLine) and line.level == 1 and not title:
            title = line.text
        elif isinstance(line, LinkLine):
            dated = gemsub_entry(line.label)
            if dated is not None:
                entries.add(line.raw_url, dated[1], dated[0])
    if not entries.kept:
        return None
    return entries.feed("gemsub", title, None)


def _timestamp(text: str | None) -> float | None:
    """RFC 3339 (Atom, twtxt) or RFC 822 (RSS) date-time as seconds since the epoch."""
    text = (text or "").strip()
    if not text or len(text) > 64:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        return when.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def _text(element: Element | None) -> str:
    return "".join(element.itertext()) if element is not None else ""


def _xml_feed(url: str, body: bytes, now: float) -> Feed | None:
    try:
        root = fromstring(body, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except (ParseError, DefusedXmlException, ValueError, UnicodeError):
        return None
    if root.tag == f"{ATOM}feed":
        return _atom(url, root, now)
    if root.tag == "rss":
        return _rss(url, root.find("channel"), root.iter("item"), "", now)
    if root.tag == f"{RDF}RDF":
        return _rss(url, root.find(f"{RSS1}channel"), root.iter(f"{RSS1}item"), RSS1, now)
    return None


def _atom(url: str, root: Element, now: float) -> Feed:
    entries = _Entries(url, now)
    for entry in root.iter(f"{ATOM}entry"):
        links = entry.findall(f"{ATOM}link")
        href = next(
            (a.get("href", "") for a in links if a.get("rel", "alternate") == "alternate"), ""
        )
        published = _timestamp(entry.findtext(f"{ATOM}updated")) or _timestamp(
            entry.findtext(f"{ATOM}published")
        )
        entries.add(href, _text(entry.find(f"{ATOM}title")), published)
    author = _text(root.find(f"{ATOM}author/{ATOM}name")) or None
    return entries.feed("atom", _text(root.find(f"{ATOM}title")), author)


def _rss(url: str, channel: Element | None, items: Iterable[Element], ns: str, now: float) -> Feed:
    entries = _Entries(url, now)
    for item in items:
        published = _timestamp(item.findtext(f"{ns}pubDate")) or _timestamp(
            item.findtext(f"{DC}date")
        )
        entries.add(item.findtext(f"{ns}link") or "", _text(item.find(f"{ns}title")), published)
    title = _text(channel.find(f"{ns}title")) if channel is not None else ""
    author = None
    if channel is not None:
        author = channel.findtext("managingEditor") or channel.findtext(f"{DC}creator")
    return entries.feed("rss", title, author)


def _twtxt(url: str, text: str, now: float) -> Feed | None:
    entries = _Entries(url, now)
    meta: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep and key.strip().lower() not in meta:
                meta[key.strip().lower()] = value.strip()
            continue
        stamp, tab, post = line.partition("\t")
        if not tab:
            continue
        published = _timestamp(stamp)
        found = _URL_IN_TEXT.search(post)
        href = found.group(0) if found else f"#{stamp.strip()}"
        entries.add(href, post, published)
    if not entries.kept:
        return None
    return entries.feed("twtxt", meta.get("nick", ""), meta.get("nick"))
