"""The feeds a crawl found, and their entries: written with the page they were read from,
read by the faces (``geminibot feeds``, the search capsule, the portal) through
:mod:`geminibot.store.whatsnew`.

A fetched page that is a feed (:mod:`geminibot.feeds.parse` reads it; the store takes
anything shaped as :class:`~geminibot.store.records.FeedLike`) is written in the page's
transaction (:func:`visit_feed`, :func:`store_feed`): its ``feeds`` row is created or
updated, an entry not known yet is added (``first_seen`` = the fetch), a known one takes
the feed's title and date, and one the feed no longer lists stays as history with
``removed_at`` (listed again, it is live again). Entries are keyed by feed and URL: the
same page listed by two feeds is two rows, and the aggregator
(:func:`geminibot.store.whatsnew.new_entries`) shows it once.

Statements are written once for both engines, as :mod:`geminibot.store.statements`'
are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from geminibot.store.records import FeedLike, FetchedPage

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
#: A page that was a feed and is no longer one (another content, or gone): its entries
#: become history, the feed has none live.
DROP_ENTRIES = sa.text(
    "UPDATE feed_entries SET removed_at = :now WHERE removed_at IS NULL"
    " AND feed_id = (SELECT id FROM feeds WHERE url = :url)"
)
EMPTY_FEED = sa.text("UPDATE feeds SET entries = 0, fetched_at = :now WHERE url = :url")

Run = Callable[[Any, sa.TextClause, dict[str, Any]], Any]


def visit_feed(run: Run, conn: Any, fetched: FetchedPage) -> None:
    """The feed side of a visit (:class:`~geminibot.store.records.FetchedPage`), inside
    the caller's transaction: the feed it read is stored; a page that was a feed moves its
    feed's fetch time when fetched unchanged, and drops its entries when written as no
    longer one (a ``listed`` not-found answer keeps the page, and its feed, as they were)."""
    page = fetched.page
    if fetched.listed or (fetched.unchanged and not fetched.was_feed):
        return
    if fetched.unchanged:
        run(conn, TOUCH_FEED, {"at": page.fetched_at, "url": page.url})
    elif fetched.feed is not None:
        store_feed(run, conn, page.url, page.host, fetched.feed, page.fetched_at)
    elif fetched.was_feed:
        drop_feed(run, conn, page.url, page.fetched_at)


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


def drop_feed(run: Run, conn: Any, url: str, now: float) -> None:
    """The page at ``url``, a feed until now, is no longer one (fetched at ``now``): its
    entries are kept as history, none live (inside the caller's transaction)."""
    run(conn, DROP_ENTRIES, {"url": url, "now": now})
    run(conn, EMPTY_FEED, {"url": url, "now": now})
