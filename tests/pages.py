"""The index Page the tests store (importable as ``pages``: ``tests/`` is on ``sys.path``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from geminibot.index.tantivy_index import rebuild
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Page, store_page

#: When a test page was fetched unless the test says (seconds since the epoch).
FETCHED_AT = 1000.0


def gemtext_page(
    url: str,
    title: str = "",
    text: str | None = "",
    *,
    fetched_at: float = FETCHED_AT,
    **fields: Any,
) -> Page:
    """A ``20 text/gemini`` page of ``url``'s host, ``size`` the length of ``text``; any other
    :class:`Page` field (``links``, ``headings``, ``lang``, ``size``...) by keyword."""
    fields.setdefault("size", len(text or ""))
    fields.setdefault("mime", "text/gemini")
    return Page(
        url=url,
        host=url.split("/")[2],
        status=20,
        meta="text/gemini",
        fetched_at=fetched_at,
        title=title,
        text=text,
        **fields,
    )


def one_page_database(path: Path) -> None:
    """A crawl database at ``path`` of one page (``gemini://a.test/orbit.gmi``, about the
    orbit of a small moon), its tantivy index built and current."""
    page = gemtext_page(
        "gemini://a.test/orbit.gmi",
        "Orbits",
        "a page about the orbit of a small moon",
        fetched_at=1.0,
        size=40,
    )
    conn = connect(path)
    with transaction(conn):
        store_page(conn, page, "indexer")
    rebuild(conn)
    conn.close()
