"""A small crawl database of feeds for the faces' pages of what is new (the search
capsule's and the portal's tests): two feeds listing one entry both, an untitled entry,
one too old for the week, pages to search, and capsules first seen at various times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pages import gemtext_page

from geminibot.feeds.parse import Entry, Feed
from geminibot.store.db import connect, transaction
from geminibot.store.feedstore import store_feed
from geminibot.store.pages import store_page
from geminibot.store.sqlite_sql import ENGINE

DAY = 86400.0
NOW = 1_750_000_000.0
LOG = "gemini://log.test/index.gmi"
ATOM = "gemini://news.test/atom.xml"


def post(n: int, age_days: float, title: str) -> Entry:
    return Entry(f"gemini://log.test/{n}.gmi", title, NOW - age_days * DAY)


def whatsnew_db(path: Path) -> str:
    """The database, at ``path``; what ``--db`` would say."""
    conn = connect(path)

    def run(c: Any, statement: Any, params: dict[str, Any]) -> Any:
        return c.execute(ENGINE.sql[statement], params)

    with transaction(conn):
        for n, words in ((1, "tomatoes in May"), (2, "basil and more"), (3, "old tomatoes")):
            store_page(conn, gemtext_page(f"gemini://log.test/{n}.gmi", f"P{n}", words), "indexer")
        gemsub = Feed(
            "gemsub",
            "A \x1b[31mlog",
            None,
            (post(1, 1, "Tomatoes\nin May"), post(2, 3, ""), post(3, 30, "Too old")),
        )
        store_feed(run, conn, LOG, "log.test", gemsub, NOW - DAY)
        atom = Feed("atom", "News <&>", "Ann", (post(1, 1, "Tomatoes again"),))
        store_feed(run, conn, ATOM, "news.test", atom, NOW - DAY)
        conn.execute(
            "INSERT INTO hosts (host, first_seen, last_fetch_at) VALUES"
            f" ('log.test', {NOW - 2 * DAY}, {NOW}), ('news.test', {NOW - 90 * DAY}, {NOW}),"
            f" ('never.test', {NOW - DAY}, NULL)"
        )
    conn.close()
    return str(path)
