"""The crawl database on PostgreSQL: connection, schema by version, pages, search, stats.

The same tables as the SQLite file (:mod:`geminibot.index.db`), in PostgreSQL's types, plus
what several crawl processes sharing one database need: ``host_leases`` (which process
holds which host, until when). The full-text index is a ``tsvector`` column of ``pages``
(title weight A, headings B, URL C, body D; the ``simple`` configuration, language
neutral like FTS5's ``unicode61``) with a GIN index; :func:`search` ranks with
``ts_rank_cd`` and cuts snippets with ``ts_headline`` over the first
:data:`~geminibot.index.search.SNIPPET_SCAN_CHARS` characters of the text (the whole of
a long page would take ``ts_headline`` seconds), and answers with the same
:class:`~geminibot.index.search.SearchResult` and query syntax as the SQLite search.

The schema is :mod:`geminibot.index.schema`'s, created and upgraded by
:mod:`geminibot.index.upgrade` (one history for both engines) when a connection opens; a
database of a newer version is refused with one line.

psycopg 3 is imported only here (and by the crawl's PostgreSQL store): the ``postgres``
extra. A connection string is any libpq URI, ``postgresql://USER@HOST:PORT/DB``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from geminibot.cliutil import EXIT_NEGATIVE, EXIT_USAGE, CommandError
from geminibot.index.authority import replace_authority
from geminibot.index.errors import DatabaseError
from geminibot.index.pages import Page, page_row
from geminibot.index.query import QueryError, Term, parse_query
from geminibot.index.search import MAX_LIMIT, SNIPPET_SCAN_CHARS, SearchResult, result_from_row
from geminibot.index.stats import host_like
from geminibot.index.text import MARK, indexed_text, unmarked
from geminibot.index.upgrade import (
    PG_LEGACY_VERSIONS,
    SCHEMA_VERSION,
    VERSION_QUERY,
    check_version,
    upgrade,
    version_of,
)

if TYPE_CHECKING:
    import psycopg

#: Seconds a connection attempt may take before the database counts as unreachable.
CONNECT_TIMEOUT = 10
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

_URL_SCHEMES = ("postgresql://", "postgres://")


class UnreachableDatabase(DatabaseError):
    """The PostgreSQL server cannot be reached or refused us (not the user's syntax)."""


def command_error(exc: DatabaseError) -> CommandError:
    """The command's one line for ``exc``: a server we cannot reach or that refuses us
    is an error found (exit 1); anything else (the connection string, the schema) is
    the user's input (exit 2)."""
    code = EXIT_NEGATIVE if isinstance(exc, UnreachableDatabase) else EXIT_USAGE
    return CommandError(str(exc), code)


def is_postgres(db: str) -> bool:
    """Whether a ``--db`` value names a PostgreSQL database (a libpq URI)."""
    return db.startswith(_URL_SCHEMES)


def display(conninfo: str) -> str:
    """The connection string without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", conninfo)


def connect(conninfo: str) -> psycopg.Connection[Any]:
    """Open one connection, create or upgrade the schema; raise :class:`DatabaseError`
    (malformed string, newer schema, not a geminibot database) or
    :class:`UnreachableDatabase`."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = display(conninfo)
    try:
        conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        reason = " ".join(str(exc).split())
        raise DatabaseError(f"{name}: not a valid PostgreSQL connection string: {reason}") from None
    try:
        conn = psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT, autocommit=True)
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        raise UnreachableDatabase(f"{name}: cannot connect: {reason}") from None
    try:
        migrate(conn, conninfo)
    except BaseException:
        conn.close()
        raise
    return conn


def schema_version(conn: psycopg.Connection[Any]) -> int | None:
    """The database's schema version (see :mod:`geminibot.index.upgrade`); None for an
    empty database, 0 for one of another application."""
    row = conn.execute(
        "SELECT to_regclass('alembic_version') IS NOT NULL,"
        " to_regclass('geminibot_schema') IS NOT NULL,"
        " (SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())"
    ).fetchone()
    assert row is not None
    if row[0]:
        stored = conn.execute(VERSION_QUERY).fetchone()
        return version_of(str(stored[0])) if stored else 0
    if row[1]:
        legacy = conn.execute("SELECT version FROM geminibot_schema").fetchone()
        return PG_LEGACY_VERSIONS.get(legacy[0], legacy[0]) if legacy else 0
    return 0 if row[2] else None


def migrate(conn: psycopg.Connection[Any], conninfo: str) -> None:
    """Create the schema, or upgrade it in place, or refuse a newer one or a foreign
    database."""
    import psycopg

    name = display(conninfo)
    version = schema_version(conn)
    if version == SCHEMA_VERSION:
        return
    if version == 0:
        raise DatabaseError(f"{name}: this database has tables but is not a geminibot database")
    check_version(name, version or 0)
    try:
        upgrade(lambda: psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT), "postgresql")
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        raise DatabaseError(f"{name}: cannot set up the schema: {reason}") from None


# --- pages ---


def store_page(cur: psycopg.Cursor[Any], page: Page, role: str) -> int:
    """Insert or replace ``page`` (links and text as :func:`geminibot.index.store_page`);
    return its row id. Call inside a transaction."""
    row = page_row(page, role)
    keep_text = bool(row["keep"])
    cur.execute("DELETE FROM pages WHERE url = %s", (page.url,))
    headings = indexed_text("\n".join(page.headings)) if keep_text else None
    cur.execute(
        "INSERT INTO pages (url, host, status, meta, mime, lang, size, content_hash,"
        " fetched_at, title, duplicate_of, redirect_to, text_indexed, changed_at, gone_at,"
        " headings, body)"
        " VALUES (%(url)s, %(host)s, %(status)s, %(meta)s, %(mime)s, %(lang)s, %(size)s,"
        " %(hash)s, %(at)s, %(title)s, %(dup)s, %(redirect)s, %(keep)s, %(changed)s,"
        " %(gone)s, %(headings)s, %(body)s) RETURNING id",
        {**row, "headings": headings, "body": indexed_text(page.text or "") if keep_text else None},
    )
    added = cur.fetchone()
    assert added is not None
    page_id = int(added[0])
    if page.links:
        cur.execute(
            "INSERT INTO links (page_id, position, target, label)"
            " SELECT %s, n - 1, t, l FROM unnest(%s::text[], %s::text[])"
            " WITH ORDINALITY AS x (t, l, n)",
            (
                page_id,
                [link.target for link in page.links],
                [link.label if keep_text else "" for link in page.links],
            ),
        )
    return page_id


# --- link authority ---


def write_authority(conn: psycopg.Connection[Any], ranks: list[tuple[str, float, float]]) -> None:
    """The PostgreSQL store's :data:`~geminibot.index.authority.Writer`: every page's
    authority replaced in one transaction (searches see the old scores or the new)."""
    with conn.transaction():
        conn.execute(
            "CREATE TEMP TABLE host_rank (host TEXT, score FLOAT8, weight FLOAT8) ON COMMIT DROP"
        )
        replace_authority(conn, ranks)


# --- search ---


def to_tsquery(query: str) -> str:
    """Rewrite a user query (the syntax of :mod:`geminibot.index.query`)
    into ``to_tsquery('simple', ...)`` input: only word characters reach it."""

    def term(t: Term) -> str | None:
        words = re.findall(r"\w+", t.text.lower())
        if not words:
            return None
        if t.prefix:
            words[-1] += ":*"
        return words[0] if len(words) == 1 else "(" + " <-> ".join(words) + ")"

    parsed = parse_query(query)
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
) -> list[SearchResult]:
    """Ranked results for ``query`` (best first), each with a snippet around the matches:
    ``limit`` of them from the ``offset``-th on, only from hosts matching ``host`` (a shell
    pattern, the key itself or a web origin's host name) when given. ``score`` is the
    negated ``ts_rank_cd`` (saturated, see :data:`RANK_NORMALIZATION`), so that lower is
    better as with bm25; ``authority``: times the page's link-authority weight (1 for a
    page without one), as the SQLite search does."""
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    expr = to_tsquery(query)
    by_host: str = ""
    hosts: dict[str, str] = {}
    if host is not None:
        by_host = " AND (p.host LIKE %(host)s OR p.host LIKE '%%://' || %(host)s)"
        hosts["host"] = host_like(host)
    lang = parse_query(query).lang
    if lang is not None:  # the MIME type's language: the store knows no other
        by_host += " AND (lower(p.lang) = %(lang)s OR lower(p.lang) LIKE %(lang)s || '-%%')"
        hosts["lang"] = lang
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
    rows = conn.execute(
        "WITH q AS (SELECT to_tsquery('simple', %(expr)s) AS q,"
        " EXISTS (SELECT 1 FROM authority) AS computed)"
        " SELECT p.url, p.title, p.mime, p.lang, p.size, p.fetched_at,"
        " ts_headline('simple', left(coalesce(p.body, ''), %(scan)s), q.q, %(options)s),"
        " ts_headline('simple', left(coalesce(p.headings, ''), %(scan)s), q.q, %(options)s),"
        " left(coalesce(p.body, ''), %(scan)s), char_length(p.body) > %(scan)s,"
        f" -{rank} AS score"
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
    return [
        result_from_row((*row[:6], _cut_marks(row[6], row[8], bool(row[9])), row[7]), row[10])
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
