"""The search capsule's pages of what is new (docs/feeds.md): each one read of the crawl
database (a :class:`~geminibot.store.database.Database`) to the lines of one gemtext page, run off the event
loop by :class:`~geminibot.searchcap.app.SearchCapsule`.

- ``/feeds``: the feeds the crawl found, by format;
- ``/new``: the entries of the past week, newest first, each URL once, written as a
  gemsub page itself: a Gemini client can subscribe to it. ``/new?QUERY``: only the
  entries whose page the search finds: subscribe to a search;
- ``/newest``: the capsules first seen in the last 30 days;
- ``/random``: ``30`` to a random searchable, live page.

Text from the network (titles) is made one plain line
(:func:`~geminibot.why.render.one_line`) before it goes into a page. The spans and
bounds are those of :mod:`geminibot.store.whatsnew`, shared with the portal.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from geminibot.feeds.parse import FORMATS
from geminibot.store.database import Database
from geminibot.store.whatsnew import (
    FEEDS_LISTED,
    NEWEST_LISTED,
    NEWEST_SPAN,
    feed_formats,
    known_feeds,
    newest_hosts,
    random_live_page,
    week,
)
from geminibot.urls import InvalidURL, host_key, host_url
from geminibot.why.render import one_line as line

#: Longest title shown, in characters.
MAX_TITLE = 200


def day(when: float | None) -> str:
    return "-" if when is None else datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d")


def capsule(url: str) -> str:
    try:
        return host_key(url)
    except InvalidURL:
        return ""


def feeds_page(database: Database) -> list[str]:
    """/feeds: the known feeds, by format, latest entry first in each."""
    counts = feed_formats(database)
    feeds = known_feeds(database, FEEDS_LISTED)
    lines = ["# Known feeds", ""]
    if not feeds:
        lines += ["The crawl has found no feed yet.", ""]
    for fmt in FORMATS:
        listed = [f for f in feeds if f.format == fmt]
        if not listed:
            continue
        lines += [f"## {fmt} ({counts.get(fmt, len(listed))})", ""]
        for feed in listed:
            title = line(feed.title, MAX_TITLE) or feed.url
            note = f"{feed.entries} entries, latest {day(feed.last_entry)}"
            lines.append(f"=> {feed.url} {title} · {note}")
        lines.append("")
    lines += ["=> /new What is new (subscribe to it)", "=> / Home"]
    return lines


def new_page(
    database: Database, now: float, query: str | None = None, matches: set[str] | None = None
) -> list[str]:
    """/new (``query``: /new?QUERY, its entries only those in ``matches``): the entries
    of the past week as a gemsub page (a date at the start of each link's label)."""
    entries = week(database, now, matches)
    title = "What is new in Geminispace" if query is None else f"What is new: {line(query, 100)}"
    lines = [f"# {title}", ""]
    lines.append("The entries of the past week in the feeds the crawl knows, newest first.")
    lines.append("Subscribe to this page: each dated link is an entry.")
    lines.append("")
    if not entries:
        lines += ["Nothing new this week.", ""]
    for entry in entries:
        lines.append(
            f"=> {entry.url} {day(entry.published)} {line(entry.title, MAX_TITLE) or capsule(entry.url)}"
        )
    lines += ["", "=> /feeds Known feeds", "=> /newest New capsules", "=> / Home"]
    return lines


def newest_page(database: Database, now: float) -> list[str]:
    """/newest: the capsules first seen in the last 30 days, newest first."""
    hosts = newest_hosts(database, now - NEWEST_SPAN, NEWEST_LISTED)
    lines = ["# New capsules", "", "Capsules the crawl first met in the last 30 days.", ""]
    if not hosts:
        lines += ["None lately.", ""]
    for host, first_seen, pages in hosts:
        lines.append(f"=> {host_url(host)} {host}: first seen {day(first_seen)}, {pages} pages")
    lines += ["", "=> /new What is new", "=> / Home"]
    return lines


def random_page(database: Database, pick: Callable[[int, int], int]) -> str | None:
    """/random: the URL of a random searchable, live page (None: none yet)."""
    return random_live_page(database, pick)
