"""The feeds a crawl found, and their entries: written with the page they were read from,
read by the faces (``geminibot feeds``, the search capsule, the portal), with the other
reads of "what is new": the capsules first seen lately, a random live page.

A fetched page that is a feed (:mod:`geminibot.feeds.parse` reads it; the store takes
anything shaped as :class:`FeedLike`) is written in the page's transaction
(:func:`store_feed`): its ``feeds`` row is created or updated, an entry not known yet
is added (``first_seen`` = the fetch), a known one takes the feed's title and date, and
one the feed no longer lists stays as history with ``removed_at`` (listed again, it is
live again). Entries are keyed by feed and URL: the same page listed by two feeds is two
rows, and the aggregator (:func:`new_entries`) shows it once.

Statements are written once for both engines, as :mod:`geminibot.store.statements`'
are; the reads take an open :class:`~geminibot.store.database.Database` of either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa

if TYPE_CHECKING:
    from geminibot.store.database import Database

#: Feeds a face lists (``/feeds``).
FEEDS_LISTED = 500
#: Entries a face lists (``/new``, ``/new.atom``).
NEW_LISTED = 200
#: The span ``/new`` covers: a week, in seconds.
NEW_SPAN = 7 * 86400.0
#: Search results ``/new`` with a query matches the week's entries against.
NEW_MATCHES = 200
#: The span ``/newest`` covers: 30 days, in seconds.
NEWEST_SPAN = 30 * 86400.0
#: Capsules ``/newest`` lists.
NEWEST_LISTED = 200


class EntryLike(Protocol):
    """What the store keeps of a feed's entry."""

    @property
    def url(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def published(self) -> float: ...


class FeedLike(Protocol):
    """What the store keeps of a feed (:class:`geminibot.feeds.parse.Feed` is one)."""

    @property
    def format(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def author(self) -> str | None: ...
    @property
    def entries(self) -> Sequence[EntryLike]: ...


#: A feed's row created or updated by a fetch (its live entries counted by the caller).
SAVE_FEED = sa.text(
    "INSERT INTO feeds (url, host, format, title, author, first_seen, fetched_at,"
    " last_entry, entries) VALUES (:url, :host, :format, :title, :author, :now, :now,"
    " :last_entry, :entries) ON CONFLICT (url) DO UPDATE SET format = excluded.format,"
    " title = excluded.title, author = excluded.author, fetched_at = excluded.fetched_at,"
    " last_entry = excluded.last_entry, entries = excluded.entries RETURNING id"
)
#: A feed fetched again unchanged: only its fetch time moves.
TOUCH_FEED = sa.text("UPDATE feeds SET fetched_at = :at WHERE url = :url")
FEED_ENTRIES = sa.text(
    "SELECT url, title, published, removed_at FROM feed_entries WHERE feed_id = :feed"
)
ADD_ENTRY = sa.text(
    "INSERT INTO feed_entries (feed_id, url, title, published, first_seen)"
    " VALUES (:feed, :url, :title, :published, :now)"
)
#: An entry listed again, or with another title or date: live, as the feed says now.
UPDATE_ENTRY = sa.text(
    "UPDATE feed_entries SET title = :title, published = :published, removed_at = NULL"
    " WHERE feed_id = :feed AND url = :url"
)
REMOVE_ENTRY = sa.text(
    "UPDATE feed_entries SET removed_at = :now WHERE feed_id = :feed AND url = :url"
)
#: The known feeds, latest entry first.
KNOWN_FEEDS = sa.text(
    "SELECT url, format, title, author, entries, last_entry, first_seen, fetched_at"
    " FROM feeds ORDER BY last_entry DESC NULLS LAST, url LIMIT :limit"
)
#: The live entries dated since a time, each URL once (as the feed dating it latest
#: lists it, then the feed that listed it first), newest first (then the latest found).
NEW_ENTRIES = sa.text(
    "SELECT url, title, published, first_seen, feed FROM (SELECT e.url, e.title,"
    " e.published, e.first_seen, f.url AS feed, row_number() OVER (PARTITION BY e.url"
    " ORDER BY e.published DESC, e.first_seen, f.id) AS n"
    " FROM feed_entries e JOIN feeds f ON f.id = e.feed_id"
    " WHERE e.removed_at IS NULL AND e.published >= :since) AS listed"
    " WHERE n = 1 ORDER BY published DESC, first_seen DESC, url LIMIT :limit"
)
#: How many feeds of each format.
FEED_FORMATS = sa.text("SELECT format, count(*) FROM feeds GROUP BY format ORDER BY format")

#: The capsules first seen since a time that answered at least once, newest first, with
#: their pages.
NEWEST_HOSTS = sa.text(
    "SELECT h.host, h.first_seen, (SELECT count(*) FROM pages p WHERE p.host = h.host)"
    " FROM hosts h WHERE h.first_seen >= :since AND h.last_fetch_at IS NOT NULL"
    " ORDER BY h.first_seen DESC, h.host LIMIT :limit"
)
PAGE_IDS = sa.text("SELECT min(id), max(id) FROM pages")
#: The first searchable, live page from a row id on (a random page: a random id).
LIVE_PAGE_FROM = sa.text(
    "SELECT url FROM pages WHERE id >= :id AND text_indexed AND gone_at IS NULL ORDER BY id LIMIT 1"
)

Run = Callable[[Any, sa.TextClause, dict[str, Any]], Any]


def store_feed(run: Run, conn: Any, url: str, host: str, feed: FeedLike, now: float) -> int:
    """Write the feed fetched at ``url`` (on ``host``) at ``now`` and its entries, inside
    the caller's transaction (``run(conn, statement, params)`` runs a statement); returns
    how many of its entries are new to it."""
    entries = {e.url: e for e in feed.entries}
    last = max((e.published for e in entries.values()), default=None)
    params = {
        "url": url,
        "host": host,
        "format": feed.format,
        "title": feed.title,
        "author": feed.author,
        "now": now,
        "last_entry": last,
        "entries": len(entries),
    }
    feed_id = run(conn, SAVE_FEED, params).fetchone()[0]
    known = {str(r[0]): r[1:] for r in run(conn, FEED_ENTRIES, {"feed": feed_id}).fetchall()}
    added = 0
    for entry in entries.values():
        row = {"feed": feed_id, "url": entry.url, "title": entry.title}
        row["published"] = entry.published
        was = known.get(entry.url)
        if was is None:
            run(conn, ADD_ENTRY, {**row, "now": now})
            added += 1
        elif tuple(was) != (entry.title, entry.published, None):
            run(conn, UPDATE_ENTRY, row)
    for gone, (_, _, removed_at) in known.items():
        if gone not in entries and removed_at is None:
            run(conn, REMOVE_ENTRY, {"feed": feed_id, "url": gone, "now": now})
    return added


@dataclass(frozen=True)
class KnownFeed:
    """A feed as the faces list it."""

    url: str
    format: str
    title: str
    author: str | None
    entries: int
    last_entry: float | None
    first_seen: float
    fetched_at: float


@dataclass(frozen=True)
class NewEntry:
    """An entry as the aggregator shows it (``feed``: one of the feeds listing it)."""

    url: str
    title: str
    published: float
    first_seen: float
    feed: str


def _rows(database: Database, statement: sa.TextClause, params: dict[str, Any]) -> list[Any]:
    return list(database.run(statement, **params).fetchall())


def known_feeds(database: Database, limit: int) -> list[KnownFeed]:
    """The known feeds, latest entry first, at most ``limit``."""
    return [KnownFeed(*row) for row in _rows(database, KNOWN_FEEDS, {"limit": limit})]


def new_entries(database: Database, since: float, limit: int) -> list[NewEntry]:
    """The live entries dated at or after ``since``, newest first, each URL once."""
    rows = _rows(database, NEW_ENTRIES, {"since": since, "limit": limit})
    return [NewEntry(str(u), str(t), float(p), float(s), str(f)) for u, t, p, s, f in rows]


def week(database: Database, now: float, matches: set[str] | None = None) -> list[NewEntry]:
    """The faces' ``/new``: the entries of the :data:`NEW_SPAN` before ``now``, newest
    first, at most :data:`NEW_LISTED`; with ``matches`` (the URLs a search found), only
    those among the first :data:`NEW_MATCHES`."""
    if matches is None:
        return new_entries(database, now - NEW_SPAN, NEW_LISTED)
    listed = new_entries(database, now - NEW_SPAN, NEW_MATCHES)
    return [e for e in listed if e.url in matches][:NEW_LISTED]


def feed_formats(database: Database) -> dict[str, int]:
    """How many feeds of each format the database knows."""
    return {str(fmt): int(n) for fmt, n in _rows(database, FEED_FORMATS, {})}


def newest_hosts(database: Database, since: float, limit: int) -> list[tuple[str, float, int]]:
    """The capsules first seen at or after ``since`` (and reached): host, when, pages."""
    rows = _rows(database, NEWEST_HOSTS, {"since": since, "limit": limit})
    return [(str(host), float(first), int(pages)) for host, first, pages in rows]


def random_live_page(database: Database, pick: Callable[[int, int], int]) -> str | None:
    """A searchable, live page chosen by ``pick(low, high)`` (a random integer in the
    range, both ends included: :meth:`random.Random.randint`) among the pages' row ids;
    None when there is none. Two reads by the primary key, whatever the index's size."""
    low, high = _rows(database, PAGE_IDS, {})[0]
    if low is None:
        return None
    for start in (pick(int(low), int(high)), int(low)):  # past the last live one: the first
        found = _rows(database, LIVE_PAGE_FROM, {"id": start})
        if found:
            return str(found[0][0])
    return None
