"""Writing fetched pages into the index.

A :class:`Page` is what the crawler learned from one response, already extracted (title,
headings, text, links). :func:`write_page` writes it: metadata always, outgoing links
always, and the searchable text only when the page is text and the role allows it
(``researcher`` keeps statistics and links, never page text), at most
:data:`MAX_INDEXED_CHARS` characters of its body and of its headings
(:func:`indexed_text`: a page may be megabytes long; what it puts in the index, and so
what any search may have to read of it, is bounded).

:func:`write_page` runs inside the caller's transaction, so a page, its links and the
frontier rows for those links commit together or not at all. Writing the same page twice
replaces the first copy (idempotent).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geminibot.store.statements import Engine

#: Roles whose index keeps page text (title, headings, body) for search.
TEXT_ROLES = frozenset({"indexer", "archiver"})
#: Most characters of a page's text (its body; its headings too) that go into the index:
#: the text beyond them is neither stored for search nor searched. 256 Ki characters
#: hold a long essay or a book's chapter; a page of megabytes is cut, at a word.
MAX_INDEXED_CHARS = 262_144
#: Most labels of the links to a file (image, PDF...) that its text takes, each once; and
#: their characters in all. The labels are those of the pages stored before the file
#: (the crawler stores a page, then fetches what it links to); a page that links to it
#: later gives it its label when the file is fetched again.
MAX_FILE_LABELS = 50
MAX_FILE_LABEL_CHARS = 4_000


@dataclass(frozen=True)
class Link:
    """A link of a page: the absolute URL it points to and its text."""

    target: str
    label: str = ""


@dataclass(frozen=True)
class Page:
    """One fetched URL as it goes into the index."""

    url: str
    host: str
    status: int
    meta: str
    fetched_at: float
    size: int = 0
    mime: str | None = None
    lang: str | None = None
    content_hash: str | None = None
    title: str = ""
    headings: tuple[str, ...] = ()
    text: str | None = None  # None: not a text page (metadata only)
    links: tuple[Link, ...] = field(default_factory=tuple)
    duplicate_of: str | None = None
    redirect_to: str | None = None
    changed_at: float | None = None  # its content last changed (None: not since first seen)
    gone_at: float | None = None  # it went away (None: live)
    charset_ok: bool | None = None  # its body decodes by its charset (None: not text)


def indexed_text(text: str) -> str:
    """The part of ``text`` that goes into the index: all of it up to
    :data:`MAX_INDEXED_CHARS` characters, else its first characters up to that limit, cut
    before a partial word."""
    if len(text) <= MAX_INDEXED_CHARS:
        return text
    cut = text[:MAX_INDEXED_CHARS]
    if not text[MAX_INDEXED_CHARS].isspace():
        space = max(cut.rfind(" "), cut.rfind("\n"))
        if space > MAX_INDEXED_CHARS // 2:
            cut = cut[:space]
    return cut


def keeps_text(page: Page, role: str) -> bool:
    """Whether the index keeps ``page``'s title and text: a text page, not a duplicate,
    of a role that keeps text."""
    return role in TEXT_ROLES and page.text is not None and page.duplicate_of is None


def page_row(page: Page, keep: bool) -> tuple[object, ...]:
    """The ``pages`` row of ``page`` as either store writes it
    (:data:`~geminibot.store.statements.PAGE_ROW`), its title only if its text is kept."""
    title = page.title if keep else ""
    return (
        page.url,
        page.host,
        page.status,
        page.meta,
        page.mime,
        page.lang,
        page.size,
        page.content_hash,
        page.fetched_at,
        title,
        page.duplicate_of,
        page.redirect_to,
        keep,
        page.changed_at,
        page.gone_at,
        page.charset_ok,
    )


def is_file(page: Page) -> bool:
    """Whether ``page`` is a file searchable by its links (a non-text answer with text:
    :func:`geminibot.crawl.page.file_page`)."""
    return page.text is not None and page.mime is not None and not page.mime.startswith("text/")


def with_labels(page: Page, labels: list[str]) -> Page:
    """A file's page with the ``labels`` of the links to it: its title the first (else its
    file name), its text theirs, at most :data:`MAX_FILE_LABEL_CHARS` characters, then its
    own (name and path words, MIME type)."""
    if not labels:
        return page
    shown = " | ".join(labels)[:MAX_FILE_LABEL_CHARS]
    return replace(page, title=labels[0][:200], text=f"{shown}\n{page.text or ''}")


def write_page(conn: Any, engine: Engine, page: Page, role: str) -> int:
    """Insert or replace ``page`` on ``engine``'s connection ``conn``: its row, its links,
    its text in the engine's full-text index; its row id. Call inside a transaction."""
    from geminibot.store import statements as q  # (SQLAlchemy: not for every Page user)

    sql = engine.sql
    if is_file(page):
        found = conn.execute(sql[q.FILE_LABELS], {"url": page.url, "limit": MAX_FILE_LABELS})
        page = with_labels(page, [r[0] for r in found.fetchall()])
    keep = keeps_text(page, role)
    old = conn.execute(sql[q.PAGE_ID], {"url": page.url}).fetchone()
    if old is not None:
        conn.execute(sql[engine.drop_text], {"id": old[0]})
        conn.execute(sql[q.DELETE_PAGE], {"id": old[0]})
    text = {
        "headings": indexed_text("\n".join(page.headings)) if keep else None,
        "body": indexed_text(page.text or "") if keep else None,
    }
    row = page_row(page, keep)
    if in_row := engine.add_page.names[len(q.PAGE_ROW) :]:  # (the engine's text columns)
        row += tuple(text[name] for name in in_row)
    added = conn.execute(sql[engine.add_page], row)
    page_id = getattr(added, "lastrowid", None)  # (sqlite3's; psycopg has none)
    if page_id is None:
        page_id = int(conn.execute(sql[q.PAGE_ID], {"url": page.url}).fetchone()[0])
    if page.links:
        links = [
            (page_id, i, link.target, link.label if keep else "")
            for i, link in enumerate(page.links)
        ]
        conn.cursor().executemany(sql[q.ADD_LINK], links)
    if keep:
        params = {"id": page_id, "title": page.title, "url": page.url, **text}
        for statement in engine.add_text:
            conn.execute(sql[statement], params)
    return page_id


def store_page(conn: sqlite3.Connection, page: Page, role: str) -> int:
    """:func:`write_page` on an SQLite connection."""
    from geminibot.store.sqlite_sql import ENGINE

    return write_page(conn, ENGINE, page, role)


def find_by_hash(conn: sqlite3.Connection, content_hash: str, url: str) -> str | None:
    """The URL of an already indexed page with the same content, other than ``url``."""
    from geminibot.store import statements as q
    from geminibot.store.sqlite_sql import ENGINE

    row = conn.execute(ENGINE.sql[q.FIRST_WITH_HASH], {"hash": content_hash, "url": url})
    found = row.fetchone()
    return None if found is None else str(found[0])
