"""Full-text search over the index: bm25 ranking, FTS5 snippets, safe query strings.

User queries are never passed to FTS5 as they are (its syntax turns ``-``, ``:``, ``(``,
``AND`` and stray quotes into errors or surprises). :func:`to_fts_query` rewrites them:

- words are matched as words, all of them required (``gemini crawler``);
- ``"a phrase"`` matches those words in that order;
- ``word*`` matches words starting with ``word``;
- ``-word`` (or ``-"a phrase"``) excludes pages that contain it;
- ``a OR b`` matches either side.

Anything that leaves nothing to search for is a :class:`QueryError` with a clear message.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from geminibot.index.authority import has_authority
from geminibot.index.query import MAX_QUERY_LENGTH, ParsedQuery, QueryError, Term, parse_query
from geminibot.index.tantivy_index import open_current

__all__ = [
    "MAX_QUERY_LENGTH",
    "QueryError",
    "SearchResult",
    "parse_query",
    "search",
    "to_fts_query",
]

#: Most results one search returns.
MAX_LIMIT = 1000
#: Words of context around each match in a snippet.
SNIPPET_TOKENS = 16
#: bm25 column weights: title, headings, body, url.
COLUMN_WEIGHTS = (10.0, 5.0, 1.0, 2.0)
#: Characters of page text shown for a page that matched through link text only.
PLAIN_SNIPPET_CHARS = 120
#: Search engines: the derived tantivy index when current, else FTS5 (``auto``).
ENGINES = ("auto", "fts5", "tantivy")


@dataclass(frozen=True)
class SearchResult:
    url: str
    title: str
    snippet: str
    score: float  # bm25: lower is better
    mime: str | None
    lang: str | None
    size: int
    fetched_at: float

    def as_json(self) -> dict[str, object]:
        return {
            "url": self.url,
            "title": self.title,
            "snippet": self.snippet,
            "score": round(self.score, 4),
            "mime": self.mime,
            "lang": self.lang,
            "size": self.size,
            "fetched_at": self.fetched_at,
        }


def _fts_term(term: Term) -> str:
    return '"' + term.text.replace('"', '""') + '"' + ("*" if term.prefix else "")


def to_fts_query(query: str | ParsedQuery) -> str:
    """Rewrite a user query into an FTS5 MATCH expression (see module docstring)."""
    parsed = parse_query(query) if isinstance(query, str) else query
    expr = " OR ".join("(" + " AND ".join(_fts_term(t) for t in g) + ")" for g in parsed.groups)
    if parsed.excluded:
        expr = "(" + expr + ") NOT (" + " OR ".join(_fts_term(t) for t in parsed.excluded) + ")"
    return expr


def search(
    conn: sqlite3.Connection,
    query: str,
    limit: int = 10,
    *,
    engine: str = "auto",
    authority: bool = True,
) -> list[SearchResult]:
    """Ranked results for ``query`` (best first), each with a snippet around the matches.

    ``engine``: ``auto`` uses the derived tantivy index when it is built and current
    (:mod:`geminibot.index.tantivy_index`), else FTS5; ``fts5`` or ``tantivy`` force one
    (``tantivy`` raises :class:`QueryError` when the index is missing or stale).
    ``authority``: multiply text relevance by the page's link-authority weight when the
    database has one (:mod:`geminibot.index.authority`)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if engine not in ENGINES:
        raise QueryError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    parsed = parse_query(query)
    expr = to_fts_query(parsed)
    index = None if engine == "fts5" else open_current(conn)
    if engine == "tantivy" and index is None:
        raise QueryError("no current tantivy index: run 'geminibot index rebuild --db PATH'")
    if index is not None:
        hits = index.search(parsed, limit, authority=authority)
        return _read_back(conn, expr, hits)
    weights = ", ".join(str(w) for w in COLUMN_WEIGHTS)
    score = f"bm25(pages_fts, {weights})"
    if authority and has_authority(conn):
        # bm25 is negative (lower is better): a weight above 1 makes it better still.
        score += " * coalesce((SELECT weight FROM authority a WHERE a.url = p.url), 1.0)"
    sql = (
        "SELECT p.url, p.title, p.mime, p.lang, p.size, p.fetched_at,"
        f" snippet(pages_fts, 2, '[', ']', '…', {SNIPPET_TOKENS}),"
        f" snippet(pages_fts, 1, '[', ']', '…', {SNIPPET_TOKENS}),"
        f" {score} AS score"
        f" FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid"
        " WHERE pages_fts MATCH ? ORDER BY score, p.id LIMIT ?"
    )
    try:
        rows = conn.execute(sql, (expr, limit)).fetchall()
    except sqlite3.OperationalError as exc:  # should not happen after to_fts_query; be safe
        raise QueryError(f"cannot run this query: {exc}") from None
    return [_result(tuple(row[:-1]), row[-1]) for row in rows]


def _read_back(
    conn: sqlite3.Connection, expr: str, hits: list[tuple[int, float]]
) -> list[SearchResult]:
    """Results for tantivy's (page id, score) hits, from the store, with FTS5 snippets.

    Scores are negated so that, as with bm25 in FTS5, lower is better."""
    sql = (
        "SELECT p.url, p.title, p.mime, p.lang, p.size, p.fetched_at,"
        f" snippet(pages_fts, 2, '[', ']', '…', {SNIPPET_TOKENS}),"
        f" snippet(pages_fts, 1, '[', ']', '…', {SNIPPET_TOKENS})"
        " FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid"
        " WHERE pages_fts MATCH ? AND pages_fts.rowid = ?"
    )
    plain = (  # a page found through link text only: no match in its own text to show
        "SELECT p.url, p.title, p.mime, p.lang, p.size, p.fetched_at,"
        f" substr(pages_fts.body, 1, {PLAIN_SNIPPET_CHARS}), ''"
        " FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid WHERE pages_fts.rowid = ?"
    )
    results = []
    for page_id, score in hits:
        row = conn.execute(sql, (expr, page_id)).fetchone()
        if row is None:
            row = conn.execute(plain, (page_id,)).fetchone()
        if row is not None:  # None: deleted from the store since the index was built
            results.append(_result(tuple(row), -score))
    return results


def _result(row: tuple[Any, ...], score: float) -> SearchResult:
    url, title, mime, lang, size, fetched_at, body_snip, head_snip = row
    snippet = body_snip if "[" in body_snip or not head_snip else head_snip
    return SearchResult(
        url=url,
        title=title,
        snippet=" ".join(snippet.split()),
        score=float(score),
        mime=mime,
        lang=lang,
        size=int(size),
        fetched_at=float(fetched_at),
    )
