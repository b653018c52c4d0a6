"""The crawl database on PostgreSQL: connection, schema by version, pages, search, stats.

The same tables as the SQLite file (:mod:`geminibot.index.db`), in PostgreSQL's types, plus
what several crawl processes sharing one database need: ``host_leases`` (which process
holds which host, until when). The full-text index is a ``tsvector`` column of ``pages``
(title weight A, headings B, URL C, body D; the ``simple`` configuration, language
neutral like FTS5's ``unicode61``) with a GIN index; :func:`search` ranks with
``ts_rank_cd`` and cuts snippets with ``ts_headline``, and answers with the same
:class:`~geminibot.index.search.SearchResult` and query syntax as the SQLite search.

The schema version is the one row of ``geminibot_schema``. :data:`MIGRATIONS` is
append-only: version N is the list of statements that take a database from N-1 to N, all
applied in one transaction under an advisory lock, so processes starting together migrate
once. A database of a newer version is refused with one line.

psycopg 3 is imported only here (and by the crawl's PostgreSQL store): the ``postgres``
extra. A connection string is any libpq URI, ``postgresql://USER@HOST:PORT/DB``.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from geminibot.cliutil import EXIT_NEGATIVE, EXIT_USAGE, CommandError
from geminibot.index.db import DatabaseError
from geminibot.index.pages import TEXT_ROLES, Page
from geminibot.index.query import QueryError, Term, parse_query
from geminibot.index.search import MAX_LIMIT, SearchResult, result_from_row
from geminibot.index.stats import UrlRow, status_filter
from geminibot.index.text import MARK, unmarked

if TYPE_CHECKING:
    import psycopg

#: Seconds a connection attempt may take before the database counts as unreachable.
CONNECT_TIMEOUT = 10
#: Words of context in a ``ts_headline`` snippet (as FTS5's snippet).
SNIPPET_WORDS = 16
#: ``ts_rank_cd`` weights {D, C, B, A}: body 1, URL 2, headings 5, title 10 (the SQLite
#: bm25 column weights, scaled to at most 1).
RANK_WEIGHTS = "{0.1, 0.2, 0.5, 1.0}"
#: ``ts_rank_cd`` normalization 32: rank / (rank + 1). The order by text alone is the
#: same, but it saturates as bm25 does, so that a page repeating a word fifty times is
#: not fifty times as relevant and the link-authority weight (at most a few times) can
#: outweigh it.
RANK_NORMALIZATION = 32
#: The advisory lock key taken while the schema is created or upgraded.
MIGRATION_LOCK = 0x67656D69

_URL_SCHEMES = ("postgresql://", "postgres://")

_V1 = (
    "CREATE TABLE geminibot_schema (version INTEGER NOT NULL)",
    "INSERT INTO geminibot_schema (version) VALUES (0)",
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE hosts (
        host TEXT PRIMARY KEY,
        first_seen DOUBLE PRECISION NOT NULL,
        last_fetch_at DOUBLE PRECISION,
        last_duration DOUBLE PRECISION,
        slow_downs INTEGER NOT NULL DEFAULT 0,
        not_before DOUBLE PRECISION NOT NULL DEFAULT 0,
        urls_total INTEGER NOT NULL DEFAULT 0,
        skipped_reason TEXT
    )""",
    # Which crawl process holds a host, until when (renewed by hold_host, right before
    # every request).
    """CREATE TABLE host_leases (
        host TEXT PRIMARY KEY,
        holder TEXT,
        lease_until DOUBLE PRECISION NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE urls (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        url TEXT NOT NULL UNIQUE,
        host TEXT NOT NULL,
        path TEXT NOT NULL,
        has_query BOOLEAN NOT NULL,
        depth INTEGER NOT NULL,
        parent TEXT,
        state TEXT NOT NULL,
        reason TEXT,
        lease TEXT,
        updated_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX urls_host_state ON urls (host, state, id)",
    "CREATE INDEX urls_state ON urls (state)",
    "CREATE INDEX urls_host_path ON urls (host, path, has_query)",
    """CREATE TABLE robots (
        host TEXT NOT NULL,
        name TEXT NOT NULL,
        fetched_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        outcome TEXT NOT NULL,
        reason TEXT NOT NULL,
        status INTEGER,
        body BYTEA,
        PRIMARY KEY (host, name)
    )""",
    """CREATE TABLE decisions (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        url TEXT NOT NULL,
        host TEXT NOT NULL,
        allowed BOOLEAN NOT NULL,
        reason TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX decisions_url ON decisions (url)",
    """CREATE TABLE fetches (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        url TEXT NOT NULL,
        host TEXT NOT NULL,
        status INTEGER,
        meta TEXT NOT NULL DEFAULT '',
        error TEXT,
        started_at DOUBLE PRECISION NOT NULL,
        duration DOUBLE PRECISION NOT NULL
    )""",
    r"""CREATE TABLE pages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        url TEXT NOT NULL UNIQUE,
        host TEXT NOT NULL,
        status INTEGER NOT NULL,
        meta TEXT NOT NULL,
        mime TEXT,
        lang TEXT,
        size BIGINT NOT NULL,
        content_hash TEXT,
        fetched_at DOUBLE PRECISION NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        duplicate_of TEXT,
        redirect_to TEXT,
        text_indexed BOOLEAN NOT NULL DEFAULT false,
        headings TEXT,
        body TEXT,
        tsv TSVECTOR GENERATED ALWAYS AS (CASE WHEN text_indexed THEN
            setweight(to_tsvector('simple', title), 'A')
            || setweight(to_tsvector('simple', coalesce(headings, '')), 'B')
            || setweight(to_tsvector('simple', regexp_replace(url, '[^[:alnum:]]+', ' ', 'g')), 'C')
            || setweight(to_tsvector('simple', coalesce(body, '')), 'D')
        ELSE ''::tsvector END) STORED
    )""",
    "CREATE INDEX pages_hash ON pages (content_hash)",
    "CREATE INDEX pages_host ON pages (host)",
    "CREATE INDEX pages_tsv ON pages USING GIN (tsv)",
    """CREATE TABLE links (
        page_id BIGINT NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        target TEXT NOT NULL,
        label TEXT NOT NULL,
        PRIMARY KEY (page_id, position)
    )""",
)

#: Version 2: link authority (:mod:`geminibot.index.authority`), and the index of link
#: targets that backlinks (``serve-search``) look up.
_V2 = (
    """CREATE TABLE authority (
        url TEXT PRIMARY KEY,
        score DOUBLE PRECISION NOT NULL,
        weight DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX links_target ON links (target)",
)

#: Version 3: attempts per URL and certificate pins (issue 14).
_V3 = (
    # Attempts at a URL cut short (see geminibot.crawl.frontier, MAX_URL_ATTEMPTS).
    "ALTER TABLE urls ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
    # Certificate pins (trust on first use) per Gemini host and port, kept between runs.
    """CREATE TABLE pins (
        host TEXT NOT NULL,
        port INTEGER NOT NULL,
        fingerprint TEXT NOT NULL,
        first_seen DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (host, port)
    )""",
)

#: Version 4: freshness, as SQLite's schema 3 (geminibot.index.db): next visit and learned
#: interval; ``attempts`` (version 3) also counts failed requests in a row. Older rows are
#: due a day after their last change (a failure: an hour; one given up: never).
_V4 = (
    "ALTER TABLE urls ADD COLUMN next_visit DOUBLE PRECISION",
    "ALTER TABLE urls ADD COLUMN revisit_interval DOUBLE PRECISION",
    "UPDATE urls SET next_visit = updated_at + 86400, attempts = 0"
    " WHERE state IN ('done', 'refused')",
    "UPDATE urls SET next_visit = updated_at + 3600, attempts = greatest(attempts, 1)"
    " WHERE state = 'failed' AND coalesce(reason, '') NOT LIKE 'given up:%'",
    "CREATE INDEX urls_next_visit ON urls (next_visit) WHERE next_visit IS NOT NULL",
    "CREATE INDEX pages_duplicate_of ON pages (duplicate_of) WHERE duplicate_of IS NOT NULL",
    "CREATE INDEX fetches_started ON fetches (started_at)",
    "CREATE INDEX decisions_at ON decisions (at)",
)

#: Version 5: per host, its deep URLs and its failures in a row, as SQLite's schema 4.
_V5 = (
    "ALTER TABLE hosts ADD COLUMN deep_urls INTEGER",
    "ALTER TABLE hosts ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE hosts ADD COLUMN failing_since DOUBLE PRECISION",
)

#: Append-only: MIGRATIONS[n - 1] takes a database from version n - 1 to n.
MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5)
SCHEMA_VERSION = len(MIGRATIONS)


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
        migrate(conn, name)
    except BaseException:
        conn.close()
        raise
    return conn


def schema_version(conn: psycopg.Connection[Any]) -> int | None:
    """The database's schema version; None for an empty database."""
    row = conn.execute("SELECT to_regclass('geminibot_schema') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return None
    version = conn.execute("SELECT version FROM geminibot_schema").fetchone()
    return int(version[0]) if version else 0


def migrate(conn: psycopg.Connection[Any], name: str) -> None:
    """Create the schema, or upgrade it in place, or refuse a newer one."""
    import psycopg

    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            version = schema_version(conn)
            if version is None:
                others = conn.execute(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
                ).fetchone()
                if others and others[0]:
                    raise DatabaseError(
                        f"{name}: this database has tables but is not a geminibot database"
                    )
                version = 0
            if version > SCHEMA_VERSION:
                raise DatabaseError(
                    f"{name}: database schema version {version} is newer than this "
                    f"geminibot understands ({SCHEMA_VERSION})"
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target - 1]:
                    conn.execute(statement.encode())
                conn.execute("UPDATE geminibot_schema SET version = %s", (target,))
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        raise DatabaseError(f"{name}: cannot set up the schema: {reason}") from None


# --- pages ---


def store_page(cur: psycopg.Cursor[Any], page: Page, role: str) -> int:
    """Insert or replace ``page`` (links and text as :func:`geminibot.index.store_page`);
    return its row id. Call inside a transaction."""
    keep_text = role in TEXT_ROLES and page.text is not None and page.duplicate_of is None
    cur.execute("DELETE FROM pages WHERE url = %s", (page.url,))
    headings = "\n".join(page.headings) if keep_text else None
    body = page.text if keep_text else None
    title = page.title if keep_text else ""
    cur.execute(
        "INSERT INTO pages (url, host, status, meta, mime, lang, size, content_hash,"
        " fetched_at, title, duplicate_of, redirect_to, text_indexed, headings, body)"
        " VALUES (%(url)s, %(host)s, %(status)s, %(meta)s, %(mime)s, %(lang)s, %(size)s,"
        " %(hash)s, %(at)s, %(title)s, %(dup)s, %(redirect)s, %(keep)s, %(headings)s,"
        " %(body)s) RETURNING id",
        {
            "url": page.url,
            "host": page.host,
            "status": page.status,
            "meta": page.meta,
            "mime": page.mime,
            "lang": page.lang,
            "size": page.size,
            "hash": page.content_hash,
            "at": page.fetched_at,
            "title": title,
            "dup": page.duplicate_of,
            "redirect": page.redirect_to,
            "keep": keep_text,
            "headings": headings,
            "body": body,
        },
    )
    row = cur.fetchone()
    assert row is not None
    page_id = int(row[0])
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
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            "CREATE TEMP TABLE host_rank (host TEXT, score FLOAT8, weight FLOAT8) ON COMMIT DROP"
        )
        cur.executemany("INSERT INTO host_rank VALUES (%s, %s, %s)", ranks)
        cur.execute("DELETE FROM authority")
        cur.execute(
            "INSERT INTO authority (url, score, weight) SELECT p.url, h.score, h.weight"
            " FROM pages p JOIN host_rank h ON h.host = p.host"
        )
        cur.execute(
            "INSERT INTO settings (key, value) VALUES ('authority_computed_at', %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(time.time()),),
        )


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


def host_like(pattern: str) -> str:
    """The LIKE pattern of a shell pattern (``*`` and ``?``) on host keys."""
    text = pattern.strip().lower().replace("\\", "\\\\")
    text = text.replace("%", "\\%").replace("_", "\\_")
    return text.replace("*", "%").replace("?", "_")


def list_urls(
    conn: psycopg.Connection[Any],
    *,
    status: str | None = None,
    host: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[UrlRow]:
    """:func:`geminibot.index.stats.list_urls` on PostgreSQL (``stats --urls``): the same
    rows in the same order, filtered the same way."""
    by_status, p1 = status_filter(status)
    by_host, p2 = "", tuple[str, ...]()
    if host is not None:
        like = host_like(host)
        by_host, p2 = " AND (u.host LIKE %s OR u.host LIKE '%%://' || %s)", (like, like)
    rows = conn.execute(
        "SELECT u.url, u.host, u.state, p.status, u.reason FROM urls u"
        f" LEFT JOIN pages p ON p.url = u.url WHERE true{by_status.replace('?', '%s')}{by_host}"
        " ORDER BY u.id LIMIT %s OFFSET %s",
        (*p1, *p2, limit, offset),
    ).fetchall()
    return [UrlRow(str(r[0]), str(r[1]), str(r[2]), r[3], r[4]) for r in rows]


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
    hosts: tuple[str, ...] = ()
    if host is not None:
        like = host_like(host)
        by_host, hosts = " AND (p.host LIKE %s OR p.host LIKE '%%://' || %s)", (like, like)
    options = (
        f"StartSel={MARK[0]}, StopSel={MARK[1]}, MaxWords={SNIPPET_WORDS},"
        f" MinWords={SNIPPET_WORDS // 2},"
        " ShortWord=0, MaxFragments=1, FragmentDelimiter=…"
    )
    weight = (
        " * coalesce((SELECT a.weight FROM authority a WHERE a.url = p.url), 1.0)"
        if authority
        else ""
    )
    rows = conn.execute(
        "WITH q AS (SELECT to_tsquery('simple', %s) AS q)"
        " SELECT p.url, p.title, p.mime, p.lang, p.size, p.fetched_at,"
        " ts_headline('simple', coalesce(p.body, ''), q.q, %s),"
        " ts_headline('simple', coalesce(p.headings, ''), q.q, %s),"
        f" coalesce(p.body, ''), -ts_rank_cd(%s::float4[], p.tsv, q.q, %s){weight} AS score"
        f" FROM pages p, q WHERE p.tsv @@ q.q{by_host} ORDER BY score, p.id LIMIT %s OFFSET %s",
        (expr, options, options, RANK_WEIGHTS, RANK_NORMALIZATION, *hosts, limit, offset),
    ).fetchall()
    return [result_from_row((*row[:6], _cut_marks(row[6], row[8]), row[7]), row[9]) for row in rows]


def _cut_marks(headline: str, body: str) -> str:
    """``…`` where the snippet cuts the body, as FTS5's ``snippet()`` marks it."""
    plain = unmarked(headline)
    at = body.find(plain) if plain else -1
    if at < 0:
        return headline
    before = "…" if body[:at].strip() else ""
    after = "…" if body[at + len(plain) :].strip() else ""
    return before + headline + after
