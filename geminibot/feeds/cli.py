"""``geminibot feeds``: the feeds a crawl found, and what is new in them (the aggregator).

Read-only: it opens an existing crawl database (SQLite file or PostgreSQL URL) and never
creates one. Text from the network (titles, URLs) is escaped before the terminal and
each line fits :data:`~geminibot.cliutil.LINE_WIDTH` columns; ``--json`` writes one
object per feed or entry.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    LINE_WIDTH,
    CommandError,
    clipped,
    emit_json,
    human_duration,
    parse_duration,
    positive_int,
    terminal_safe,
)
from geminibot.store.database import open_database
from geminibot.urls import InvalidURL, host_key

if TYPE_CHECKING:
    from geminibot.store.whatsnew import KnownFeed, NewEntry

#: What ``feeds --new`` shows without ``--since``: the entries of the past week.
DEFAULT_SINCE = 7 * 86400.0
#: The longest ``--since`` accepted (a year and a day).
MAX_SINCE = 366 * 86400.0
#: Feeds or entries listed without ``--limit``.
DEFAULT_LIMIT = 100
#: Fewest columns a title is shown in, in a ``feeds --new`` line (a longer URL leaves
#: it out: the URL is kept whole while it fits).
MIN_TITLE = 4
#: Columns of the capsule (host) in a ``feeds --new`` line.
CAPSULE_WIDTH = 20


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "feeds",
        help="the feeds a crawl found (gemsub, Atom, RSS, twtxt), and what is new in them",
        description="The feeds a crawl found while crawling: format, title, entries and "
        "date of the latest entry, latest first. With --new, the aggregator: the entries "
        "dated in the last --since, newest first, one line each (date, capsule, title, "
        "URL); an entry listed by several feeds is shown once. Reads the database only.",
    )
    parser.add_argument(
        "--db", required=True, metavar="PATH|URL", help="crawl database (file or postgresql://)"
    )
    parser.add_argument("--new", action="store_true", help="the new entries, newest first")
    parser.add_argument(
        "--since",
        type=_since,
        metavar="DURATION",
        help="with --new: entries dated in this last span (90m, 12h, 7d; default: "
        f"{human_duration(DEFAULT_SINCE)}, at most {human_duration(MAX_SINCE)})",
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help="at most N feeds or entries",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per feed or entry")
    parser.set_defaults(run=run_feeds)


def _since(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < seconds <= MAX_SINCE:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected more than 0 to {human_duration(MAX_SINCE)}"
        )
    return seconds


def day(when: float | None) -> str:
    """A date as the feeds show it (``YYYY-MM-DD``, UTC); ``-`` for none."""
    return "-" if when is None else datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d")


def iso(when: float | None) -> str | None:
    return None if when is None else datetime.fromtimestamp(when, UTC).isoformat()


def capsule(url: str) -> str:
    """The capsule (host) of an entry's URL."""
    try:
        return host_key(url)
    except (InvalidURL, ValueError):
        return ""


def feed_json(feed: KnownFeed) -> dict[str, object]:
    return {
        "url": feed.url,
        "format": feed.format,
        "title": feed.title,
        "author": feed.author,
        "entries": feed.entries,
        "last_entry": iso(feed.last_entry),
        "first_seen": iso(feed.first_seen),
        "fetched_at": iso(feed.fetched_at),
    }


def entry_json(entry: NewEntry) -> dict[str, object]:
    return {
        "date": iso(entry.published),
        "capsule": capsule(entry.url),
        "title": entry.title,
        "url": entry.url,
        "feed": entry.feed,
        "first_seen": iso(entry.first_seen),
    }


def feed_lines(feed: KnownFeed) -> list[str]:
    """Two lines of a feed: format, entries, last entry and title; its URL."""
    title = terminal_safe(feed.title) or "(untitled)"
    head = f"{feed.format:<6}  {feed.entries:>7}  {day(feed.last_entry):<10}  {title}"
    return [clipped(head), clipped("  " + terminal_safe(feed.url))]


def entry_line(entry: NewEntry) -> str:
    """One line of an entry: date, capsule, title, URL (the title cut, or left out, so
    that the line fits; a URL too long for the line is cut)."""
    host = clipped(terminal_safe(capsule(entry.url)), CAPSULE_WIDTH)
    url = terminal_safe(entry.url)
    head = f"{day(entry.published)}  {host:<{CAPSULE_WIDTH}}  "
    room = LINE_WIDTH - len(head) - len(url) - 2
    title = terminal_safe(entry.title)
    if not title or room < MIN_TITLE:
        return clipped(head + url)
    return f"{head}{clipped(title, room)}  {url}"


def run_feeds(args: argparse.Namespace) -> int:
    if args.since is not None and not args.new:
        raise CommandError("feeds: --since goes with --new")
    from geminibot.store.whatsnew import known_feeds, new_entries

    with open_database(args.db) as database:
        if args.new:
            since = time.time() - (args.since or DEFAULT_SINCE)
            entries = new_entries(database, since, args.limit)
        else:
            feeds = known_feeds(database, args.limit)
    if args.new:
        for entry in entries:
            emit_json(entry_json(entry)) if args.json else print(entry_line(entry))
        if not entries and not args.json:
            print("no new entries", file=sys.stderr)
        return EXIT_OK if entries else EXIT_NEGATIVE
    if feeds and not args.json:
        print(f"{'FORMAT':<6}  {'ENTRIES':>7}  {'LAST ENTRY':<10}  TITLE / URL")
    for feed in feeds:
        if args.json:
            emit_json(feed_json(feed))
        else:
            print("\n".join(feed_lines(feed)))
    if not feeds and not args.json:
        print("no feeds known", file=sys.stderr)
    return EXIT_OK if feeds else EXIT_NEGATIVE
