"""Writing fetched pages into the index.

A :class:`Page` is what the crawler learned from one response, already extracted (title,
headings, text, links). :func:`write_page` writes it: metadata always, outgoing links
always, and the searchable text only when the page is text and the role allows it
(``researcher`` keeps statistics and links, never page text), at most
:data:`MAX_INDEXED_CHARS` characters of its body and of its headings
(:func:`indexed_text`: a page may be megabytes long; what it puts in the index, and so
what any search may have to read of it, is bounded).

A file (image, PDF...: :func:`is_file`) is searched by the labels of the links to it:
written, it takes those the store holds (:func:`with_labels`); a page written later with
a labelled link to a file the store holds gives it the new label at once
(:func:`relabel_files`), at most :data:`MAX_RELABELLED_FILES` files per page.

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
#: their characters in all.
MAX_FILE_LABELS = 50
MAX_FILE_LABEL_CHARS = 4_000
#: Most files whose text one page written may change (:func:`relabel_files`): the first
#: files the store holds that its labelled links point to, in link order. A page of a
#: thousand links to files rewrites a hundred files' text at most; the others take its
#: labels when they are fetched again.
MAX_RELABELLED_FILES = 100


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


def file_text(path_words: str, mime: str) -> str:
    """A file's own text (:func:`geminibot.crawl.page.file_page`): two lines, the words of
    its path and file name, and its MIME type. The labels of the links to it go before
    them (:func:`labelled_text`), so that its last two lines are its own text."""
    return f"{' '.join(path_words.split())}\n{' '.join(mime.split())}"


#: Joins the labels of a file's text.
LABEL_JOINER = " | "


def labelled_text(labels: list[str], own: str) -> tuple[str, str]:
    """A file's title and text with the ``labels`` of the links to it (at least one): its
    title the first, its text theirs, at most :data:`MAX_FILE_LABEL_CHARS` characters,
    then its ``own`` (:func:`file_text`)."""
    shown = LABEL_JOINER.join(labels)[:MAX_FILE_LABEL_CHARS]
    return labels[0][:200], f"{shown}\n{own}"


def split_file_text(text: str) -> tuple[list[str], str]:
    """A file's text (:func:`labelled_text`) as the labels it shows (the last one maybe
    cut) and its own text (:func:`file_text`)."""
    lines = text.split("\n")
    shown = "\n".join(lines[:-2])
    return (shown.split(LABEL_JOINER) if shown else []), "\n".join(lines[-2:])


def with_labels(page: Page, labels: list[str]) -> Page:
    """A file's page with the ``labels`` of the links to it (:func:`labelled_text`; none:
    its title is its file name, its text its own)."""
    if not labels:
        return page
    title, text = labelled_text(labels, page.text or "")
    return replace(page, title=title, text=text)


def file_labels(conn: Any, engine: Engine, url: str) -> list[str]:
    """The labels of the links to the file ``url``, each once, oldest page's first, at
    most :data:`MAX_FILE_LABELS`."""
    from geminibot.store import statements as q

    found = conn.execute(engine.sql[q.FILE_LABELS], {"url": url, "limit": MAX_FILE_LABELS})
    return [str(r[0]) for r in found.fetchall()]


def _has_room_for(shown: list[str], labels: list[str]) -> bool:
    """Whether a file showing the labels ``shown`` would take one of ``labels``: one not
    shown, and room for it (fewer than :data:`MAX_FILE_LABELS` labels and
    :data:`MAX_FILE_LABEL_CHARS` characters)."""
    if len(shown) >= MAX_FILE_LABELS or len(LABEL_JOINER.join(shown)) >= MAX_FILE_LABEL_CHARS:
        return False
    return any(label not in shown for label in labels)


def relabel_files(conn: Any, engine: Engine, page_id: int, links: tuple[Link, ...]) -> int:
    """Rewrite the text of the files the store holds that the labelled ``links`` of page
    ``page_id`` (just written) point to, with the labels of the links to them now
    (:func:`file_labels`): of the first :data:`MAX_RELABELLED_FILES` such files in link
    order, those that show none of this page's labels for them and have room for one.
    A file's text is replaced in the engine's text index as a page's is written (on
    SQLite, logged for the derived index, whose updater builds its document again).
    Returns how many files were rewritten."""
    sql = engine.sql
    params = {"id": page_id, "limit": MAX_RELABELLED_FILES}
    files = conn.execute(sql[engine.linked_files], params).fetchall()
    if not files:
        return 0
    given: dict[str, list[str]] = {}
    for link in links:
        if link.label:
            given.setdefault(link.target, []).append(link.label)
    changed = 0
    for file_id, url, found in files:
        body = str(found or "")
        shown, own = split_file_text(body)
        labels = file_labels(conn, engine, url) if _has_room_for(shown, given.get(url, [])) else []
        if not labels:
            continue
        title, text = labelled_text(labels, own)
        if text != body:
            new = {"id": file_id, "title": title, "headings": "", "body": text, "url": url}
            for statement in engine.replace_text:
                conn.execute(sql[statement], new)
            changed += 1
    return changed


def write_page(conn: Any, engine: Engine, page: Page, role: str) -> int:
    """Insert or replace ``page`` on ``engine``'s connection ``conn``: its row, its links,
    its text in the engine's full-text index, and the labels its links give the files the
    store holds (:func:`relabel_files`); its row id. Call inside a transaction."""
    from geminibot.store import statements as q  # (SQLAlchemy: not for every Page user)

    sql = engine.sql
    if is_file(page):
        page = with_labels(page, file_labels(conn, engine, page.url))
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
        if any(link.label for link in page.links):
            relabel_files(conn, engine, page_id, page.links)
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
