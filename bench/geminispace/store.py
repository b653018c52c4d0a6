"""Fill a geminibot database with a space's pages as a perfect crawl of one day would.

:func:`crawl_ready` then records the URLs and hosts as the crawl records them, so that a
crawl can take the filled store over and revisit it.

For benchmarks and relevance evaluation that need the index, not the network: every
finite URL of every host that answers (its gemlog's of that day included) (policy-refused ``/private/`` pages left out), each
response extracted by the crawler's own :func:`geminibot.crawl.page.extract` and written by
:func:`geminibot.store.pages.store_page`, duplicates marked as the crawler marks them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator

from geminibot.crawl.page import extract
from geminibot.store.db import transaction
from geminibot.store.freshness import INITIAL_REVISIT
from geminibot.store.pages import find_by_hash, store_page

from .space import Space

#: Pages per transaction.
BATCH = 2_000
EPOCH = 1.8e9


def fill_store(
    space: Space,
    conn: sqlite3.Connection,
    day: int = 0,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write every page of ``space`` on ``day`` into ``conn``; returns the pages written."""
    written = 0
    pending: list[tuple[str, str, str]] = []
    for request in _requests(space, day):
        pending.append(request)
        if len(pending) >= BATCH:
            written = _write_batch(space, conn, day, pending, written, progress)
    if pending:
        written = _write_batch(space, conn, day, pending, written, progress)
    return written


def _requests(space: Space, day: int) -> Iterator[tuple[str, str, str]]:
    """(host, path, URL) of every page a polite crawl of ``day`` fetches."""
    for i in range(space.hosts):
        if not space.answers(i, day):
            continue
        host = space.host(i)
        for path in [*space.paths(i), *space.gemlogs.paths(i, day)]:
            if path.startswith("/private/"):
                continue
            yield host, path, f"gemini://{host}{path}"


def _write_batch(
    space: Space,
    conn: sqlite3.Connection,
    day: int,
    pending: list[tuple[str, str, str]],
    written: int,
    progress: Callable[[int], None] | None,
) -> int:
    """Store the pages of ``pending`` in one transaction and empty it; the new total."""
    with transaction(conn):
        for host, path, url in pending:
            answer = space.respond(host, path, day)
            got = extract(url, host, answer.status, answer.meta, answer.body, EPOCH + written)
            page = got.page
            if page.content_hash is not None and page.text is not None:
                original = find_by_hash(conn, page.content_hash, url)
                if original is not None:
                    page = page.__class__(**{**page.__dict__, "duplicate_of": original})
            store_page(conn, page, "indexer")
            written += 1
    pending.clear()
    if progress is not None:
        progress(written)
    return written


def crawl_ready(conn: sqlite3.Connection, fetched_at: float) -> int:
    """Record the stored pages as the crawl records what it visited, so that ``geminibot
    crawl`` (and ``serve``) can take the store over and revisit it: each page fetched at
    ``fetched_at``, its URL done and due again :data:`~geminibot.store.freshness.
    INITIAL_REVISIT` later (a page seen once), each host seen then. Returns the URLs
    recorded; a URL already recorded is left as it is."""
    rows = conn.execute("SELECT url, host FROM pages").fetchall()
    with transaction(conn):
        conn.execute("UPDATE pages SET fetched_at = ?", (fetched_at,))
        before = conn.total_changes
        conn.executemany(
            "INSERT OR IGNORE INTO urls (url, host, path, has_query, depth, state,"
            " updated_at, next_visit, revisit_interval)"
            " VALUES (?, ?, ?, ?, ?, 'done', ?, ?, ?)",
            (_url_row(url, host, fetched_at) for url, host in rows),
        )
        recorded = conn.total_changes - before
        conn.execute(
            "INSERT OR IGNORE INTO hosts (host, first_seen, last_fetch_at, urls_total)"
            " SELECT host, ?, ?, count(*) FROM pages GROUP BY host",
            (fetched_at, fetched_at),
        )
    return recorded


def _url_row(url: str, host: str, fetched_at: float) -> tuple[object, ...]:
    rest = url.split("/", 3)[3] if url.count("/") >= 3 else ""
    path, query = ("/" + rest).split("?", 1) if "?" in rest else ("/" + rest, None)
    depth = 0 if path == "/" and query is None else 1
    due = fetched_at + INITIAL_REVISIT
    return (url, host, path, query is not None, depth, fetched_at, due, INITIAL_REVISIT)
