"""Full-text search over the index: bm25 ranking, FTS5 snippets, safe query strings.

User queries are never passed to FTS5 as they are (its syntax turns ``-``, ``:``, ``(``,
``AND`` and stray quotes into errors or surprises). :func:`to_fts_query` rewrites them:

- words are matched as words, all of them required (``gemini crawler``);
- ``"a phrase"`` matches those words in that order;
- ``word*`` matches words starting with ``word``;
- ``-word`` (or ``-"a phrase"``) excludes pages that contain it;
- ``a OR b`` matches either side;
- ``intitle:word`` and ``inurl:word`` match in that column only (FTS5's column filter),
  and the scope operators (``site:``, ``mime:``, ``size:``, ``lang:``) are conditions on
  the page's row (:mod:`geminibot.index.scope`); a query of operators alone lists the
  pages in its scope by their link-authority weight.

Anything that leaves nothing to search for is a :class:`QueryError` with a clear message,
and a query over the query budget (:mod:`geminibot.index.query`) a
:class:`~geminibot.index.query.QueryTooCostly`.

A search costs what its results cost, not what their pages weigh: a page puts at most
:data:`~geminibot.store.pages.MAX_INDEXED_CHARS` characters of text in the index, and a
result's snippet is found in the first :data:`SNIPPET_SCAN_CHARS` characters of its body
and of its headings (:func:`snippet_of`), read from the store as that much and no more.

Search spam: a page of a host with no trust path (link authority computed, and the host
scoring 0: no trusted host's links lead to it) is ranked with every column weighted as
its body (:data:`UNTRUSTED_WEIGHTS`), so that words it puts in its title or headings do
not put it first by themselves.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from geminibot.cliutil import terminal_safe, wrapped
from geminibot.index.documents import stem_analyzer
from geminibot.index.explain import (
    AUTHORITY,
    SHOWN,
    ScoreParts,
    explain_lines,
    scaled,
    with_factors,
)
from geminibot.index.languages import STEMMERS, primary
from geminibot.index.query import (
    MAX_QUERY_LENGTH,
    ParsedQuery,
    QueryError,
    Term,
    parse_query,
    with_site,
)
from geminibot.index.scope import scope_where, sqlite_mark
from geminibot.index.tantivy_index import Hit, open_current
from geminibot.index.text import (
    MARK,
    clean_title,
    mark_spans,
    name_title,
    render_marks,
    split_front_matter,
)
from geminibot.store.authority import has_authority

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
#: Furthest into the results a search may start (--offset).
MAX_OFFSET = 100_000
#: Words of context around each match in a snippet.
SNIPPET_TOKENS = 16
#: bm25 column weights: title, headings, body, url.
COLUMN_WEIGHTS = (10.0, 5.0, 1.0, 2.0)
#: bm25 column weights of a page of a host with no trust path (see the module docstring).
UNTRUSTED_WEIGHTS = (1.0, 1.0, 1.0, 1.0)
#: Characters of a result's body (and of its headings) searched for a snippet: a page
#: whose searched words come later (or only in its title) shows its first words instead.
SNIPPET_SCAN_CHARS = 16_384
#: Characters of page text shown for a page that matched through link text only.
PLAIN_SNIPPET_CHARS = 120
#: How a terminal shows a searched word in a snippet: bold (ANSI SGR 1, then 22).
TERMINAL_HIGHLIGHT = ("\x1b[1m", "\x1b[22m")
_WORD = re.compile(r"\w+")
#: Search engines: the derived tantivy index when current, else FTS5 (``auto``).
ENGINES = ("auto", "fts5", "tantivy")


@dataclass(frozen=True)
class SearchResult:
    """One result. ``snippet`` marks each searched word with the two characters of
    :data:`geminibot.index.text.MARK`; each display renders them its own way."""

    url: str
    title: str
    snippet: str
    score: float  # bm25: lower is better
    mime: str | None
    lang: str | None
    size: int
    fetched_at: float
    #: The parts of the relevance (-score) when asked for (:mod:`geminibot.index.explain`).
    parts: ScoreParts | None = None

    def as_json(self) -> dict[str, object]:
        """For scripts: the snippet as plain text, its highlights as [start, end)
        character offsets into it."""
        snippet, spans = mark_spans(self.snippet)
        return {
            "url": self.url,
            "title": self.title,
            "snippet": snippet,
            "highlights": [list(span) for span in spans],
            "score": round(self.score, 4),
            "mime": self.mime,
            "lang": self.lang,
            "size": self.size,
            "fetched_at": self.fetched_at,
            **({} if self.parts is None else {"score_parts": self.score_parts()}),
        }

    def score_parts(self) -> dict[str, float]:
        """The parts of ``score`` (same sign: they add up to it), rounded as it is."""
        return {name: round(-part, 4) for name, part in (self.parts or {}).items()}

    def explanation(self) -> list[str]:
        """How its relevance is made, and when the page was fetched (two lines)."""
        return explain_lines(-self.score, self.parts, self.fetched_at)

    def language_note(self, reader: str | None) -> str:
        """`` [de]`` after a title when the page's language is known and is not the
        ``reader``'s (a language code), else ""."""
        code = primary(self.lang)
        return f" [{code}]" if code and code != primary(reader) else ""

    def kind(self) -> str:
        """Its type and size: ``image/png, 67 B``, ``text/gemini, 2.1 KiB``."""
        size = f"{self.size} B"
        if self.size >= 1024:
            size = f"{self.size / 1024:.1f} KiB"
        if self.size >= 1024**2:
            size = f"{self.size / 1024**2:.1f} MiB"
        return f"{self.mime or 'unknown type'}, {size}"

    def as_text(self, number: int, *, highlight: bool = False, reader: str | None = None) -> str:
        """For a terminal: number and title (and the page's language when it is not the
        ``reader``'s), URL (whole, to copy), snippet, the servers' text escaped and
        wrapped to 80 columns; searched words in bold (:data:`TERMINAL_HIGHLIGHT`) with
        ``highlight``, else unmarked."""
        title = f"{number}. {self.title or self.url}{self.language_note(reader)}"
        if not (self.mime or "text/").startswith("text/"):  # a file found by its links
            title += f" [{self.kind()}]"
        lines = wrapped(title, "", "   ")
        lines.append(f"   {terminal_safe(self.url)}")
        shown = "\n".join(wrapped(self.snippet, "   ", "   "))
        lines.append(render_marks(shown, *(TERMINAL_HIGHLIGHT if highlight else ("", ""))))
        return "\n".join(line for line in lines if line)


def _fts_term(term: Term) -> str:
    column = f"{term.field} : " if term.field else ""
    return column + '"' + term.text.replace('"', '""') + '"' + ("*" if term.prefix else "")


def to_fts_query(query: str | ParsedQuery) -> str:
    """Rewrite a user query into an FTS5 MATCH expression (see module docstring)."""
    parsed = parse_query(query) if isinstance(query, str) else query
    if not parsed.groups:
        raise QueryError("a query of operators alone has no MATCH expression")
    expr = " OR ".join("(" + " AND ".join(_fts_term(t) for t in g) + ")" for g in parsed.groups)
    if parsed.excluded:
        expr = "(" + expr + ") NOT (" + " OR ".join(_fts_term(t) for t in parsed.excluded) + ")"
    return expr


def search(
    conn: sqlite3.Connection,
    query: str,
    limit: int = 10,
    *,
    offset: int = 0,
    host: str | None = None,
    engine: str = "auto",
    authority: bool = True,
    explain: bool = False,
) -> list[SearchResult]:
    """Ranked results for ``query`` (best first), each with a snippet around the matches:
    ``limit`` of them from the ``offset``-th on, only from hosts matching ``host`` (a shell
    pattern, as ``site:``) when given.

    ``engine``: ``auto`` uses the derived tantivy index when it is built and current
    (:mod:`geminibot.index.tantivy_index`), else FTS5; ``fts5`` or ``tantivy`` force one
    (``tantivy`` raises :class:`QueryError` when the index is missing or stale).
    ``authority``: multiply text relevance by the page's link-authority weight when the
    database has one (:mod:`geminibot.index.authority`); with tantivy, over the best
    :data:`~geminibot.index.tantivy_index.RERANK_WINDOW` pages by text, and with its
    keyword-stuffing penalty too (``False``: text relevance alone). ``explain``: each
    result's score in parts (:mod:`geminibot.index.explain`)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if not 0 <= offset <= MAX_OFFSET:
        raise QueryError(f"offset must be between 0 and {MAX_OFFSET}, got {offset}")
    if engine not in ENGINES:
        raise QueryError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    parsed = with_site(parse_query(query), host)
    index = None if engine == "fts5" else open_current(conn)
    if engine == "tantivy" and index is None:
        raise QueryError("no current tantivy index: run 'geminibot index rebuild --db PATH'")
    if index is not None:
        hits = index.search(parsed, limit, offset=offset, authority=authority, explain=explain)
        return _read_back(conn, parsed, hits)
    return _fts5_search(conn, parsed, limit, offset, authority, explain)


def _fts5_search(
    conn: sqlite3.Connection,
    parsed: ParsedQuery,
    limit: int,
    offset: int,
    authority: bool,
    explain: bool = False,
) -> list[SearchResult]:
    """:func:`search` by FTS5's bm25 (a query of operators alone: by link authority).
    With ``explain``, each column's bm25 alone, scaled to add up to the text score
    (:mod:`geminibot.index.explain`)."""
    where, params = scope_where(parsed, sqlite_mark)
    params.update(limit=limit, offset=offset)
    weighted = authority and has_authority(conn)
    weight = "(SELECT weight FROM authority a WHERE a.url = p.url)" if weighted else "1.0"
    weight = f"coalesce({weight}, 1.0)"
    if parsed.scope_only:
        sql = (
            "SELECT p.id, p.url, p.title, p.mime, p.lang, p.size, p.fetched_at,"
            f" -{weight} AS score FROM pages p"
            f" WHERE p.text_indexed{where} ORDER BY score, p.id LIMIT :limit OFFSET :offset"
        )
        rows = conn.execute(sql, params).fetchall()
        parts = [{AUTHORITY: -float(row[7])} for row in rows] if explain else None
        return _with_snippets(conn, parsed, rows, parts)
    score = _bm25(COLUMN_WEIGHTS)
    trusted = "1"
    if weighted:
        # bm25 is negative (lower is better): a weight above 1 makes it better still.
        trusted = "coalesce((SELECT a.score FROM authority a WHERE a.url = p.url), 0) > 0"
        score = f"CASE WHEN {trusted} THEN {score} ELSE {_bm25(UNTRUSTED_WEIGHTS)} END * {weight}"
    columns = ""
    if explain:  # the weight, whether trusted, and each column's bm25 alone
        alone = [_bm25(tuple(float(c == n) for c in range(4))) for n in range(4)]
        columns = f", {weight}, {trusted}, " + ", ".join(alone)
    sql = (
        "SELECT p.id, p.url, p.title, p.mime, p.lang, p.size, p.fetched_at,"
        f" {score} AS score{columns}"
        " FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid"
        f" WHERE pages_fts MATCH :match{where} ORDER BY score, p.id LIMIT :limit OFFSET :offset"
    )
    try:
        rows = conn.execute(sql, {**params, "match": to_fts_query(parsed)}).fetchall()
    except sqlite3.OperationalError as exc:  # should not happen after to_fts_query; be safe
        raise QueryError(f"cannot run this query: {exc}") from None
    return _with_snippets(
        conn, parsed, rows, [_fts5_parts(row) for row in rows] if explain else None
    )


def _fts5_parts(row: Any) -> ScoreParts:
    """The parts of an explained row's score (its columns 7 on: score, weight, trusted,
    and the bm25 of each column alone)."""
    score, weight, trusted, *alone = row[7:]
    weights = COLUMN_WEIGHTS if trusted else UNTRUSTED_WEIGHTS
    text = -float(score) / float(weight)
    columns = {
        SHOWN[name]: -float(bm25) * w
        for name, bm25, w in zip(("title", "headings", "body", "url"), alone, weights, strict=True)
    }
    return with_factors(scaled(columns, text), (AUTHORITY, float(weight)))


def _with_snippets(
    conn: sqlite3.Connection,
    parsed: ParsedQuery,
    rows: list[Any],
    parts: list[ScoreParts] | None = None,
) -> list[SearchResult]:
    """Results of rows (id, url, title, mime, lang, size, fetched_at, score), each with
    its snippet (:func:`snippet_of`) and its score's ``parts`` when given."""
    texts = _texts(conn, [int(row[0]) for row in rows])
    results = []
    for n, row in enumerate(rows):
        body, headings = texts.get(int(row[0]), ("", ""))
        snippet = snippet_of(body, headings, parsed, row[4])
        result = result_from_row((*row[1:7], snippet, ""), row[7])
        results.append(replace(result, parts=parts[n]) if parts is not None else result)
    return results


def _bm25(weights: tuple[float, ...]) -> str:
    return f"bm25(pages_fts, {', '.join(str(w) for w in weights)})"


def _texts(conn: sqlite3.Connection, ids: list[int]) -> dict[int, tuple[str, str]]:
    """The first :data:`SNIPPET_SCAN_CHARS` characters of the body and of the headings
    of each page of ``ids``, by page id (never more of them)."""
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    rows = conn.execute(
        "SELECT rowid, substr(body, 1, ?), substr(headings, 1, ?) FROM pages_fts"
        f" WHERE rowid IN ({marks})",
        (SNIPPET_SCAN_CHARS, SNIPPET_SCAN_CHARS, *ids),
    )
    return {int(i): (body or "", headings or "") for i, body, headings in rows}


def _read_back(
    conn: sqlite3.Connection, parsed: ParsedQuery, hits: list[Hit]
) -> list[SearchResult]:
    """Results for tantivy's (page id, score) hits, read from the store in one query, their
    snippets from :func:`snippet_of` (FTS5's ``snippet()`` would run the whole MATCH again
    for each result, and tokenize each page's whole text). Scores are negated so that, as
    with FTS5's bm25, lower is better."""
    if not hits:
        return []
    marks = ", ".join("?" * len(hits))
    rows = {
        row[0]: row[1:]
        for row in conn.execute(
            "SELECT p.id, p.url, p.title, p.mime, p.lang, p.size, p.fetched_at FROM pages p"
            f" WHERE p.id IN ({marks})",
            [hit.page_id for hit in hits],
        )
    }
    texts = _texts(conn, [hit.page_id for hit in hits])
    results = []
    for hit in hits:
        row = rows.get(hit.page_id)
        text = texts.get(hit.page_id)
        if row is None or text is None:  # deleted from the store since the index was built
            continue
        url, title, mime, lang, size, fetched_at = row
        shown = snippet_of(*text, parsed, hit.lang or lang)
        results.append(
            replace(
                result_from_row(
                    (url, title, mime, hit.lang or lang, size, fetched_at, shown, ""), -hit.score
                ),
                parts=hit.parts,
            )
        )
    return results


def snippet_of(body: str, headings: str, parsed: ParsedQuery, lang: str | None = None) -> str:
    """A result's snippet from the first characters of its body and headings (at most
    :data:`SNIPPET_SCAN_CHARS` of each are read): around the first searched word of the
    body, else of the headings, else the body's first :data:`PLAIN_SNIPPET_CHARS`
    (:func:`plain_snippet`). Words are matched by their stem in ``lang`` (the page's
    language, English when unknown) too."""
    words = [t for group in parsed.groups for t in group]
    body = split_front_matter(body[:SNIPPET_SCAN_CHARS])[1]
    return (
        text_snippet(body, words, lang=lang)
        or text_snippet(headings[:SNIPPET_SCAN_CHARS], words, lang=lang)
        or plain_snippet(body)
    )


def plain_snippet(text: str, limit: int = PLAIN_SNIPPET_CHARS) -> str:
    """The first words of ``text``, at most ``limit`` characters, cut at a word with
    ``…`` when it goes on."""
    flat = " ".join(text[: limit * 4].split())
    if len(flat) <= limit and len(text) <= limit * 4:
        return flat
    cut = flat[: limit + 1]
    space = cut.rfind(" ")
    cut = cut[:space] if space > limit // 2 else flat[:limit]
    return cut.rstrip(" ,;:.-–—") + "…"


def text_snippet(
    text: str, terms: list[Term], tokens: int = SNIPPET_TOKENS, *, lang: str | None = None
) -> str:
    """About ``tokens`` words of ``text`` (of its first :data:`SNIPPET_SCAN_CHARS`
    characters) around the first searched word, each searched word between the
    :data:`~geminibot.index.text.MARK` characters (the word alone, not the punctuation
    around it: ``RetroPie,`` -> marked ``RetroPie`` then ``,``); a word whose stem in
    ``lang`` (English when unknown) is a searched word's counts; "" when none occurs."""
    wanted = {_fold(w) for t in terms for w in _WORD.findall(t.text)}
    prefixes = tuple(_fold(t.text) for t in terms if t.prefix)
    stem = _stemmer(primary(lang))
    stems = {s for w in wanted for s in stem(w)}
    scanned = text[:SNIPPET_SCAN_CHARS]
    if scanned.isascii() and not _any_of(wanted | stems | set(prefixes)).search(scanned):
        return ""  # not even as part of a word: no need to look at each
    words = scanned.split()
    seen: dict[str, bool] = {}

    def matches(word: str) -> bool:
        """Whether one word (letters and digits) is searched for."""
        found = seen.get(word)
        if found is None:
            folded = _fold(word)
            found = (
                folded in wanted
                or bool(prefixes and folded.startswith(prefixes))
                or not stems.isdisjoint(stem(folded))
            )
            seen[word] = found
        return found

    def hit(token: str) -> bool:
        return any(matches(w) for w in _WORD.findall(token))

    def marked(token: str) -> str:
        return _WORD.sub(
            lambda m: f"{MARK[0]}{m.group()}{MARK[1]}" if matches(m.group()) else m.group(), token
        )

    first = next((n for n, w in enumerate(words) if hit(w)), None)
    if first is None:
        return ""
    start = max(0, first - tokens // 4)
    window = words[start : start + tokens]
    shown = " ".join(marked(w) for w in window)
    more = start + tokens < len(words) or len(text) > SNIPPET_SCAN_CHARS
    return ("…" if start else "") + shown + ("…" if more else "")


@functools.cache
def _stemmer(lang: str | None) -> Callable[[str], list[str]]:
    """The stems of a word in ``lang`` (a code of :data:`STEMMERS`; else English)."""
    analyzer = stem_analyzer(lang if lang in STEMMERS else "en")
    return lambda word: [str(s) for s in analyzer.analyze(word)]


def _any_of(words: set[str]) -> re.Pattern[str]:
    """Any of ``words`` anywhere, in any case (for ASCII text: folding is lowering)."""
    return re.compile("|".join(re.escape(w) for w in sorted(words) if w), re.IGNORECASE)


def _fold(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def result_from_row(row: tuple[Any, ...], score: float) -> SearchResult:
    """A result from (url, title, mime, lang, size, fetched_at, body snippet, headings
    snippet): the body's snippet when it shows a match (both stores' searches); the title
    cleaned, or made from the URL when the page has none."""
    url, title, mime, lang, size, fetched_at, body_snip, head_snip = row
    snippet = body_snip if MARK[0] in body_snip or not head_snip else head_snip
    return SearchResult(
        url=url,
        title=clean_title(title or "") or name_title(url),
        snippet=" ".join(snippet.split()),
        score=float(score),
        mime=mime,
        lang=lang,
        size=int(size),
        fetched_at=float(fetched_at),
    )
