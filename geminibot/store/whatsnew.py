"""What is new, read from a crawl database for the faces (``geminibot feeds``, the search
capsule, the portal): the known feeds, the entries of a span each URL once (the
aggregator), the capsules first seen lately, a random live page; and the spans and bounds
the faces share. The feeds are written by :mod:`geminibot.store.feedstore`. Each read
takes an open :class:`~geminibot.store.database.Database` of either engine; the statements
are plain strings (compiled on first use: :data:`geminibot.store.statements.Statement`),
so that the servers start without SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


#: The known feeds, latest entry first.
KNOWN_FEEDS = (
    "SELECT url, format, title, author, entries, last_entry, first_seen, fetched_at"
    " FROM feeds ORDER BY last_entry DESC NULLS LAST, url LIMIT :limit"
)
#: The live entries dated since a time, each URL once (as the feed dating it latest
#: lists it, then the feed that listed it first), newest first (then the latest found).
NEW_ENTRIES = (
    "SELECT url, title, published, first_seen, feed FROM (SELECT e.url, e.title,"
    " e.published, e.first_seen, f.url AS feed, row_number() OVER (PARTITION BY e.url"
    " ORDER BY e.published DESC, e.first_seen, f.id) AS n"
    " FROM feed_entries e JOIN feeds f ON f.id = e.feed_id"
    " WHERE e.removed_at IS NULL AND e.published >= :since) AS listed"
    " WHERE n = 1 ORDER BY published DESC, first_seen DESC, url LIMIT :limit"
)
#: How many feeds of each format.
FEED_FORMATS = "SELECT format, count(*) FROM feeds GROUP BY format ORDER BY format"

#: The capsules first seen since a time that answered at least once, newest first, with
#: their pages.
NEWEST_HOSTS = (
    "SELECT h.host, h.first_seen, (SELECT count(*) FROM pages p WHERE p.host = h.host)"
    " FROM hosts h WHERE h.first_seen >= :since AND h.last_fetch_at IS NOT NULL"
    " ORDER BY h.first_seen DESC, h.host LIMIT :limit"
)
PAGE_IDS = "SELECT min(id), max(id) FROM pages"
#: The first searchable, live page from a row id on (a random page: a random id).
LIVE_PAGE_FROM = (
    "SELECT url FROM pages WHERE id >= :id AND text_indexed AND gone_at IS NULL ORDER BY id LIMIT 1"
)


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


def _rows(database: Database, statement: str, params: dict[str, Any]) -> list[Any]:
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
