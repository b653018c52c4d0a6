"""The files about feeds: each feed the crawl found (``feeds.parquet``) and each entry of
each (``feed_entries.parquet``), those a feed no longer lists too.

A feed's title and author and its entries' titles are text of the feed's page (its
heading, its link labels, its elements): like a page's title they are given only with
``--text`` and only where the feed's host lets the crawl's bot keep text
(:attr:`~geminibot.export.model.Context.keeps_text`); otherwise null. The rest (URLs,
format, dates, counts) is what the link graph and the index give anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from geminibot.export.model import STRING, TIME, Column, Context, Dataset, Rows, micros
from geminibot.store import export_reads as reads
from geminibot.store.database import Database


def _text_of(context: Context) -> Callable[[str], bool]:
    """Whether a host's feeds' text is exported: asked for, and the host's policy lets
    its text be kept."""
    keeps = context.keeps_text
    return (lambda _host: False) if keeps is None else keeps


def _feeds(database: Database, context: Context) -> Iterator[Rows]:
    text = _text_of(context)
    for rows in database.batches(reads.FEED_ROWS, context.batch):
        yield [_feed_row(row, text(row[1])) for row in rows]


def _feed_row(row: Any, text: bool) -> tuple[Any, ...]:
    url, key, kind, title, author, first, fetched, last, entries = row
    return (
        url,
        key,
        kind,
        title if text else None,
        author if text else None,
        micros(first),
        micros(fetched),
        micros(last),
        entries,
    )


FEEDS = Dataset(
    "feeds.parquet",
    "Every feed the crawl found while crawling (docs/feeds.md): a gemsub page (dated "
    "links), an Atom or RSS document or a twtxt file, as its last fetch read it. Its "
    "title and author only with --text, and never for a host whose robots2.txt forbids "
    "keeping its text.",
    "a feed (a URL whose page is one)",
    (
        Column("url", STRING, "the feed's URL (joins index.parquet)"),
        Column("url_host_key", STRING, "its host key"),
        Column("format", STRING, "gemsub, atom, rss or twtxt"),
        Column("title", STRING, "the feed's title (null: not exported, see above)"),
        Column("author", STRING, "its author, where it names one (null: none, or not exported)"),
        Column("first_seen_time", TIME, "when the crawl first read the page as a feed"),
        Column("last_fetch_time", TIME, "when the crawl last fetched it"),
        Column("last_entry_time", TIME, "the latest date among its entries (null: none)"),
        Column("entries", pa.int32(), "the entries it listed at its last fetch"),
    ),
    _feeds,
)


def _entries(database: Database, context: Context) -> Iterator[Rows]:
    text = _text_of(context)
    for rows in database.batches(reads.FEED_ENTRY_ROWS, context.batch):
        yield [
            (feed, key, url, title if text(key) else None, *map(micros, times))
            for feed, key, url, title, *times in rows
        ]


FEED_ENTRIES = Dataset(
    "feed_entries.parquet",
    "Every entry of every feed: the URL it points to and its date, as the feed last "
    "listed it; an entry the feed no longer lists is kept, with when it went. An entry "
    "listed by two feeds has a row for each. Its title only with --text, and never for "
    "a feed whose host's robots2.txt forbids keeping its text.",
    "an entry of a feed",
    (
        Column("feed_url", STRING, "the feed's URL (joins feeds.parquet)"),
        Column("feed_host_key", STRING, "the feed's host key"),
        Column("url", STRING, "the entry's URL, resolved against the feed"),
        Column("title", STRING, "the entry's title (null: not exported, see above)"),
        Column("published_time", TIME, "the entry's date (gemsub: noon UTC of the day)"),
        Column("first_seen_time", TIME, "when the crawl first found it in the feed"),
        Column("removed_time", TIME, "when the feed stopped listing it (null: still listed)"),
    ),
    _entries,
)
