"""Full-text search of a PostgreSQL crawl database: the ``tsvector`` column of ``pages``
(:mod:`geminibot.store.pg`) ranked with ``ts_rank_cd``, snippets cut with ``ts_headline``
over the first :data:`~geminibot.index.search.SNIPPET_SCAN_CHARS` characters of the text
(the whole of a long page would take ``ts_headline`` seconds); the same :class:`~geminibot.index.search.SearchResult` and query syntax as the SQLite
search."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from geminibot.index.explain import AUTHORITY, SHOWN, ScoreParts, scaled, with_factors
from geminibot.index.query import ParsedQuery, QueryError, Term, parse_query, with_site
from geminibot.index.scope import psycopg_mark, scope_where
from geminibot.index.search import (
    MAX_LIMIT,
    SNIPPET_SCAN_CHARS,
    SearchResult,
    result_from_row,
    snippet_of,
)
from geminibot.index.text import MARK, unmarked

if TYPE_CHECKING:
    import psycopg

#: Words of context in a ``ts_headline`` snippet (as FTS5's snippet).
SNIPPET_WORDS = 16
#: ``ts_rank_cd`` weights {D, C, B, A}: body 1, URL 2, headings 5, title 10 (the SQLite
#: bm25 column weights, scaled to at most 1).
RANK_WEIGHTS = "{0.1, 0.2, 0.5, 1.0}"
#: ``ts_rank_cd`` weights of a page of a host with no trust path (authority computed and
#: the page's score 0): title, headings and URL weigh as its body (search spam, as
#: :data:`~geminibot.index.search.UNTRUSTED_WEIGHTS`).
UNTRUSTED_RANK_WEIGHTS = "{0.1, 0.1, 0.1, 0.1}"
#: ``ts_rank_cd`` normalization 32: rank / (rank + 1). The order by text alone is the
#: same, but it saturates as bm25 does, so that a page repeating a word fifty times is
#: not fifty times as relevant and the link-authority weight (at most a few times) can
#: outweigh it.
RANK_NORMALIZATION = 32
#: The ``tsvector`` weight of each field a term may be kept to (``intitle:``, ``inurl:``;
#: :data:`geminibot.store.schema`'s ``tsv``).
FIELD_WEIGHTS = {"title": "A", "url": "C"}


def to_tsquery(query: str | ParsedQuery) -> str:
    """Rewrite a user query (the syntax of :mod:`geminibot.index.query`)
    into ``to_tsquery('simple', ...)`` input: only word characters reach it."""

    def term(t: Term) -> str | None:
        words = re.findall(r"\w+", t.text.lower())
        if not words:
            return None
        weight = FIELD_WEIGHTS[t.field] if t.field else ""
        marks = [weight] * len(words)
        if t.prefix:
            marks[-1] = "*" + weight
        words = [w + (":" + m if m else "") for w, m in zip(words, marks, strict=True)]
        return words[0] if len(words) == 1 else "(" + " <-> ".join(words) + ")"

    parsed = parse_query(query) if isinstance(query, str) else query
    ors = []
    for group in parsed.groups:
        terms = [t for t in (term(item) for item in group) if t]
        if terms:
            ors.append("(" + " & ".join(terms) + ")")
    if not ors:
        raise QueryError(
            "nothing to search for: give at least one word (not only -excluded words or symbols)"
        )
    expr = " | ".join(ors)
    nots = [t for t in (term(item) for item in parsed.excluded) if t]
    if nots:
        expr = f"({expr}) & !({' | '.join(nots)})"
    return expr


def search(
    conn: psycopg.Connection[Any],
    query: str,
    limit: int = 10,
    *,
    offset: int = 0,
    host: str | None = None,
    authority: bool = True,
    explain: bool = False,
) -> list[SearchResult]:
    """Ranked results for ``query`` (best first), each with a snippet around the matches:
    ``limit`` of them from the ``offset``-th on, only from hosts matching ``host`` (a shell
    pattern, the key itself or a web origin's host name) when given. ``score`` is the
    negated ``ts_rank_cd`` (saturated, see :data:`RANK_NORMALIZATION`), so that lower is
    better as with bm25; ``authority``: times the page's link-authority weight (1 for a
    page without one), as the SQLite search does; ``explain``: each result's score in
    parts (:mod:`geminibot.index.explain`)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    parsed = with_site(parse_query(query), host)
    by_host, hosts = scope_where(parsed, psycopg_mark)
    if parsed.scope_only:
        listed = _scope_listing(conn, parsed, by_host, hosts, limit, offset, authority)
        return [replace(r, parts={AUTHORITY: -r.score}) for r in listed] if explain else listed
    expr = to_tsquery(parsed)
    options = (
        f"StartSel={MARK[0]}, StopSel={MARK[1]}, MaxWords={SNIPPET_WORDS},"
        f" MinWords={SNIPPET_WORDS // 2},"
        " ShortWord=0, MaxFragments=1, FragmentDelimiter=…"
    )
    rank = "ts_rank_cd(%(weights)s::float4[], p.tsv, q.q, %(norm)s)"
    if authority:
        untrusted = rank.replace("%(weights)s", "%(untrusted)s")
        rank = (
            "CASE WHEN q.computed AND coalesce(a.score, 0) <= 0"
            f" THEN {untrusted} ELSE {rank} END * coalesce(a.weight, 1.0)"
        )
    columns = ""
    if explain:  # the weight, whether trusted, each field's rank alone (A, B, C, D)
        alone = [f"ts_rank_cd('{ALONE[n]}'::float4[], p.tsv, q.q, %(norm)s)" for n in range(4)]
        weight = "coalesce(a.weight, 1.0)" if authority else "1.0"
        trusted = "NOT (q.computed AND coalesce(a.score, 0) <= 0)" if authority else "TRUE"
        columns = f", {weight}, {trusted}, " + ", ".join(alone)
    rows = conn.execute(
        "WITH q AS (SELECT to_tsquery('simple', %(expr)s) AS q,"
        " EXISTS (SELECT 1 FROM authority) AS computed)"
        " SELECT p.url, p.title, p.mime, p.lang, p.size, p.fetched_at,"
        " ts_headline('simple', left(coalesce(p.body, ''), %(scan)s), q.q, %(options)s),"
        " ts_headline('simple', left(coalesce(p.headings, ''), %(scan)s), q.q, %(options)s),"
        " left(coalesce(p.body, ''), %(scan)s), char_length(p.body) > %(scan)s,"
        f" -{rank} AS score{columns}"
        " FROM pages p CROSS JOIN q LEFT JOIN authority a ON a.url = p.url"
        f" WHERE p.tsv @@ q.q{by_host} ORDER BY score, p.id LIMIT %(limit)s OFFSET %(offset)s",
        {
            "expr": expr,
            "scan": SNIPPET_SCAN_CHARS,
            "options": options,
            "weights": RANK_WEIGHTS,
            "untrusted": UNTRUSTED_RANK_WEIGHTS,
            "norm": RANK_NORMALIZATION,
            **hosts,
            "limit": limit,
            "offset": offset,
        },
    ).fetchall()
    results = [
        result_from_row((*row[:6], _cut_marks(row[6], row[8], bool(row[9])), row[7]), row[10])
        for row in rows
    ]
    if explain:
        results = [replace(r, parts=_parts(row)) for r, row in zip(results, rows, strict=True)]
    return results


#: ``ts_rank_cd`` weights {D, C, B, A} keeping one field each: title (A), headings (B),
#: url (C), body (D).
ALONE = ("{0, 0, 0, 1}", "{0, 0, 1, 0}", "{0, 1, 0, 0}", "{1, 0, 0, 0}")


def _parts(row: Any) -> ScoreParts:
    """The parts of an explained row's score (columns 10 on: score, weight, trusted, and
    the rank of each field alone), each field's share scaled to the text score."""
    score, weight, trusted, *alone = row[10:]
    weights = [
        float(w)
        for w in (RANK_WEIGHTS if trusted else UNTRUSTED_RANK_WEIGHTS).strip("{}").split(",")
    ]
    by_field = dict(zip(("title", "headings", "url", "body"), alone, strict=True))
    field_weight = dict(zip(("body", "url", "headings", "title"), weights, strict=True))
    text = -float(score) / float(weight)
    shares = {SHOWN[name]: float(rank) * field_weight[name] for name, rank in by_field.items()}
    return with_factors(scaled(shares, text), (AUTHORITY, float(weight)))


def _scope_listing(
    conn: psycopg.Connection[Any],
    parsed: ParsedQuery,
    where: str,
    params: dict[str, object],
    limit: int,
    offset: int,
    authority: bool,
) -> list[SearchResult]:
    """The pages in the scope of a query of operators alone, by link-authority weight
    (as the SQLite search lists them), each with its first words as snippet."""
    weight = "coalesce(a.weight, 1.0)" if authority else "1.0"
    rows = conn.execute(
        "SELECT p.url, p.title, p.mime, p.lang, p.size, p.fetched_at,"
        " left(coalesce(p.body, ''), %(scan)s), left(coalesce(p.headings, ''), %(scan)s),"
        f" -{weight} AS score FROM pages p LEFT JOIN authority a ON a.url = p.url"
        f" WHERE p.text_indexed{where} ORDER BY score, p.id LIMIT %(limit)s OFFSET %(offset)s",
        {**params, "scan": SNIPPET_SCAN_CHARS, "limit": limit, "offset": offset},
    ).fetchall()
    return [
        result_from_row((*row[:6], snippet_of(row[6], row[7], parsed, row[3]), ""), row[8])
        for row in rows
    ]


def _cut_marks(headline: str, body: str, longer: bool) -> str:
    """``…`` where the snippet cuts the body (the first characters of it, ``longer``
    when it goes on), as FTS5's ``snippet()`` marks it."""
    plain = unmarked(headline)
    at = body.find(plain) if plain else -1
    if at < 0:
        return headline
    before = "…" if body[:at].strip() else ""
    after = "…" if longer or body[at + len(plain) :].strip() else ""
    return before + headline + after
