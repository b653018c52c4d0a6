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

import re
import sqlite3
from dataclasses import dataclass

#: Longest query accepted, in characters.
MAX_QUERY_LENGTH = 500
#: Most results one search returns.
MAX_LIMIT = 1000
#: Furthest into the results a search may start (--offset).
MAX_OFFSET = 100_000
#: Words of context around each match in a snippet.
SNIPPET_TOKENS = 16
#: bm25 column weights: title, headings, body, url.
COLUMN_WEIGHTS = (10.0, 5.0, 1.0, 2.0)

_TERM = re.compile(r'(-?)(?:"([^"]*)"?|(\S+))')
_WORDLIKE = re.compile(r"\w", re.UNICODE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class QueryError(ValueError):
    """A search query that cannot be run; the message says why."""


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


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def to_fts_query(query: str) -> str:
    """Rewrite a user query into an FTS5 MATCH expression (see module docstring)."""
    if len(query) > MAX_QUERY_LENGTH:
        raise QueryError(f"query too long ({len(query)} characters, at most {MAX_QUERY_LENGTH})")
    query = _CONTROL.sub(" ", query)
    positive: list[list[str]] = [[]]  # OR-separated groups of ANDed phrases
    negative: list[str] = []
    for match in _TERM.finditer(query):
        neg, phrase, word = match.group(1), match.group(2), match.group(3)
        if word == "OR" and not neg:
            if positive[-1]:
                positive.append([])
            continue
        text = phrase if phrase is not None else word
        if not _WORDLIKE.search(text):
            continue
        prefix = phrase is None and text.endswith("*")
        item = _quote(text.rstrip("*") if prefix else text) + ("*" if prefix else "")
        if neg:
            negative.append(item)
        else:
            positive[-1].append(item)
    groups = [g for g in positive if g]
    if not groups:
        raise QueryError(
            "nothing to search for: give at least one word (not only -excluded words or symbols)"
        )
    expr = " OR ".join("(" + " AND ".join(g) + ")" for g in groups)
    if negative:
        expr = "(" + expr + ") NOT (" + " OR ".join(negative) + ")"
    return expr


def host_filter(pattern: str | None, column: str) -> tuple[str, tuple[str, ...]]:
    """SQL (`` AND ...``) and parameters keeping rows whose host key in ``column`` matches
    the shell pattern ``pattern`` (the key itself, or the host name of a web origin, so
    ``*.example.org`` covers both protocols); no condition when ``pattern`` is None."""
    if pattern is None:
        return "", ()
    glob = pattern.strip().lower()
    return f" AND ({column} GLOB ? OR {column} GLOB '*://' || ?)", (glob, glob)


def search(
    conn: sqlite3.Connection,
    query: str,
    limit: int = 10,
    *,
    offset: int = 0,
    host: str | None = None,
) -> list[SearchResult]:
    """Ranked results for ``query`` (best first), each with a snippet around the matches:
    ``limit`` of them from the ``offset``-th on, only from hosts matching ``host`` (a shell
    pattern) when given."""
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if not 0 <= offset <= MAX_OFFSET:
        raise QueryError(f"offset must be between 0 and {MAX_OFFSET}, got {offset}")
    expr = to_fts_query(query)
    where, params = host_filter(host, "p.host")
    weights = ", ".join(str(w) for w in COLUMN_WEIGHTS)
    sql = (
        "SELECT p.url, p.title, p.mime, p.lang, p.size, p.fetched_at,"
        f" snippet(pages_fts, 2, '[', ']', '…', {SNIPPET_TOKENS}),"
        f" snippet(pages_fts, 1, '[', ']', '…', {SNIPPET_TOKENS}),"
        f" bm25(pages_fts, {weights}) AS score"
        " FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid"
        f" WHERE pages_fts MATCH ?{where} ORDER BY score, p.id LIMIT ? OFFSET ?"
    )
    try:
        rows = conn.execute(sql, (expr, *params, limit, offset)).fetchall()
    except sqlite3.OperationalError as exc:  # should not happen after to_fts_query; be safe
        raise QueryError(f"cannot run this query: {exc}") from None
    results = []
    for url, title, mime, lang, size, fetched_at, body_snip, head_snip, score in rows:
        snippet = body_snip if "[" in body_snip or not head_snip else head_snip
        results.append(
            SearchResult(
                url=url,
                title=title,
                snippet=" ".join(snippet.split()),
                score=float(score),
                mime=mime,
                lang=lang,
                size=int(size),
                fetched_at=float(fetched_at),
            )
        )
    return results
