"""A crawler on an SQLite connection, for tests that script a site (importable as
``crawlers``: ``tests/`` is on ``sys.path``): :func:`geminibot.crawl.build.build_crawler`
on the connection's batched store, on the crawl's clock."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from geminibot.crawl.adapters import Fetch
from geminibot.crawl.build import build_crawler
from geminibot.crawl.clock import Clock, TrioWallClock
from geminibot.crawl.crawler import Crawler
from geminibot.crawl.settings import CrawlOptions
from geminibot.store.crawlstore import SqliteStore


def sqlite_crawler(
    conn: sqlite3.Connection,
    fetch: Fetch,
    options: CrawlOptions,
    *,
    wall_clock: Callable[[], float] = time.time,
    clock: Clock | None = None,
    **parts: Any,
) -> Crawler:
    """The crawler of ``options`` fetching with ``fetch``, on ``conn``'s store, on
    ``clock`` (or wall-clock time from ``wall_clock`` advanced by trio's clock);
    ``parts``: :func:`~geminibot.crawl.build.build_crawler`'s other keywords."""
    clock = clock if clock is not None else TrioWallClock(wall_clock)
    store = SqliteStore(conn, clock.now, options.limits, batch=True)
    return build_crawler(store, options, clock, fetch=fetch, **parts)
