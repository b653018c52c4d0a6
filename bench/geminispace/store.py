"""Fill a geminibot database with a space's pages as a perfect crawl of one day would.

For benchmarks and relevance evaluation that need the index, not the network: every
finite URL of every host that answers (policy-refused ``/private/`` pages left out), each
response extracted by the crawler's own :func:`geminibot.crawl.page.extract` and written by
:func:`geminibot.index.store_page`, duplicates marked as the crawler marks them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator

from geminibot.crawl.page import extract
from geminibot.index import store_page, transaction
from geminibot.index.pages import find_by_hash

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
        for path in space.paths(i):
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
