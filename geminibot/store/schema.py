"""The crawl database's schema, described once for both engines (SQLAlchemy Core).

Everything a crawl keeps is in these tables: the frontier and visited set (``urls``), the
hosts and their politeness state, the policy-file cache (``robots``), every policy
decision, every request (``fetches``), certificate pins, link authority and the index
itself (``pages``, ``links``). What differs between the engines is the full-text index
and the sharing of hosts between processes:

- **SQLite**: the FTS5 table ``pages_fts`` (title, headings, body, URL) beside ``pages``,
  one row per indexed page, ``rowid`` = ``pages.id``.
- **PostgreSQL**: ``pages.headings`` and ``pages.body`` hold the text and ``pages.tsv``
  (generated, weighted A title, B headings, C URL words, D body; the ``simple``
  configuration) is searched through the GIN index ``pages_tsv``; ``host_leases`` says
  which crawl process holds which host, until when.
- **SQLite** also logs each page entering or leaving the searchable text in
  ``index_changes`` (written with each page inserted, by triggers for a deletion or
  an update), for the derived search index that follows the store
  (:mod:`geminibot.index.updater`).

:func:`metadata` builds the tables for one engine; the migrations of
:mod:`geminibot.store.upgrade` create and upgrade databases to it, and a test holds the
two to each other. Types are each engine's own (SQLite's ``REAL``/``INTEGER``/``BLOB``,
PostgreSQL's ``DOUBLE PRECISION``/``BIGINT``/``BOOLEAN``/``BYTEA``).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import TSVECTOR

#: Floating-point seconds and scores: ``REAL`` on SQLite, ``DOUBLE PRECISION`` on PostgreSQL.
Real: sa.types.TypeEngine[float] = sa.Double().with_variant(sa.REAL(), "sqlite")
#: Row ids and sizes: ``INTEGER`` on SQLite (a row id alias), ``BIGINT`` on PostgreSQL.
BigInt: sa.types.TypeEngine[int] = sa.BigInteger().with_variant(sa.INTEGER(), "sqlite")
#: Flags: 0/1 ``INTEGER`` on SQLite, ``BOOLEAN`` on PostgreSQL.
Flag: sa.types.TypeEngine[bool] = sa.Boolean(create_constraint=False).with_variant(
    sa.INTEGER(), "sqlite"
)

#: PostgreSQL's weighted text vector of a page (empty unless its text is indexed).
TSV_EXPRESSION = (
    "CASE WHEN text_indexed THEN"
    " setweight(to_tsvector('simple', title), 'A')"
    " || setweight(to_tsvector('simple', coalesce(headings, '')), 'B')"
    " || setweight(to_tsvector('simple', regexp_replace(url, '[^[:alnum:]]+', ' ', 'g')), 'C')"
    " || setweight(to_tsvector('simple', coalesce(body, '')), 'D')"
    " ELSE ''::tsvector END"
)
#: SQLite's full-text table (FTS5 has no SQLAlchemy description: it is created as is).
PAGES_FTS = (
    "CREATE VIRTUAL TABLE pages_fts USING fts5 ("
    " title, headings, body, url, tokenize = 'unicode61 remove_diacritics 2')"
)


def _id() -> sa.Column[int]:
    return sa.Column("id", BigInt, sa.Identity(always=True), primary_key=True)


def metadata(dialect: str) -> sa.MetaData:
    """The tables of a crawl database on ``dialect`` ("sqlite" or "postgresql")."""
    pg = dialect == "postgresql"
    meta = sa.MetaData()
    sa.Table(
        "settings",
        meta,
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    sa.Table(
        "hosts",
        meta,
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("first_seen", Real, nullable=False),
        sa.Column("last_fetch_at", Real),
        sa.Column("last_duration", Real),
        sa.Column("slow_downs", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("not_before", Real, nullable=False, server_default=sa.text("0")),
        sa.Column("urls_total", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("skipped_reason", sa.Text),
        sa.Column("deep_urls", sa.Integer),
        sa.Column("failures", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("failing_since", Real),
    )
    if pg:
        sa.Table(
            "host_leases",
            meta,
            sa.Column("host", sa.Text, primary_key=True),
            sa.Column("holder", sa.Text),
            sa.Column("lease_until", Real, nullable=False, server_default=sa.text("0")),
        )
    _urls(meta, pg)
    sa.Table(
        "robots",
        meta,
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("fetched_at", Real, nullable=False),
        sa.Column("expires_at", Real, nullable=False),
        sa.Column("outcome", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("status", sa.Integer),
        sa.Column("body", sa.LargeBinary),
    )
    _logs(meta)
    _index(meta, pg)
    _feeds(meta)
    if not pg:
        sa.Table(
            "index_changes",
            meta,
            sa.Column("seq", sa.INTEGER, primary_key=True),
            sa.Column("page_id", sa.INTEGER, nullable=False),
            sqlite_autoincrement=True,
        )
    sa.Table(
        "pins",
        meta,
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("port", sa.Integer, primary_key=True),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("first_seen", Real, nullable=False),
    )
    _census(meta)
    return meta


def _census(meta: sa.MetaData) -> None:
    """What a census reads beyond the crawl's own tables: each host's TLS and certificate
    as history (a row per distinct version, cipher and certificate seen, from
    ``first_seen`` to ``last_seen``), and each census taken (its figures as JSON)."""
    sa.Table(
        "tls_history",
        meta,
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("sha256", sa.Text, primary_key=True),
        sa.Column("tls_version", sa.Text, primary_key=True),
        sa.Column("cipher", sa.Text, primary_key=True),
        sa.Column("first_seen", Real, nullable=False),
        sa.Column("last_seen", Real, nullable=False),
        sa.Column("spki_sha256", sa.Text, nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("issuer", sa.Text, nullable=False),
        sa.Column("sans", sa.Text, nullable=False),
        sa.Column("trust", sa.Text, nullable=False),
        sa.Column("key_type", sa.Text, nullable=False),
        sa.Column("key_bits", sa.Integer),
        sa.Column("not_before", Real),
        sa.Column("not_after", Real),
        sa.Column("name_matches", Flag, nullable=False),
        sa.Column("parsed", Flag, nullable=False),
    )
    sa.Table(
        "censuses",
        meta,
        _id(),
        sa.Column("taken_at", Real, nullable=False),
        sa.Column("figures", sa.Text, nullable=False),
    )


def _urls(meta: sa.MetaData, pg: bool) -> None:
    """The frontier and visited set: one row per normalised URL ever seen. ``misses``:
    its "not found" answers in a row (51, 404), the first at ``missing_since``.
    ``priority``: 1 for a URL submitted or rechecked by name, claimed before its host's
    other queued URLs (0 again once it is fetched); the claim reads a host's queued URLs
    in that order, then oldest first, through ``urls_host_state``."""
    urls = sa.Table(
        "urls",
        meta,
        _id(),
        sa.Column("url", sa.Text, nullable=False, unique=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("has_query", Flag, nullable=False),
        sa.Column("depth", sa.Integer, nullable=False),
        sa.Column("parent", sa.Text),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("lease", sa.Text),
        sa.Column("updated_at", Real, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("next_visit", Real),
        sa.Column("revisit_interval", Real),
        sa.Column("misses", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("missing_since", Real),
        sa.Column("priority", sa.Integer, nullable=False, server_default=sa.text("0")),
    )
    sa.Index("urls_host_state", urls.c.host, urls.c.state, urls.c.priority.desc(), urls.c.id)
    sa.Index("urls_state", urls.c.state)
    sa.Index(
        "urls_query_path",
        urls.c.host,
        urls.c.path,
        sqlite_where=sa.text("has_query = 1"),
        postgresql_where=sa.text("has_query"),
    )
    sa.Index(
        "urls_next_visit",
        urls.c.next_visit,
        sqlite_where=sa.text("next_visit IS NOT NULL"),
        postgresql_where=sa.text("next_visit IS NOT NULL"),
    )


def _logs(meta: sa.MetaData) -> None:
    """Every policy decision taken about a URL, and every request sent."""
    decisions = sa.Table(
        "decisions",
        meta,
        _id(),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("allowed", Flag, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("at", Real, nullable=False),
    )
    sa.Index("decisions_at", decisions.c.at)
    fetches = sa.Table(
        "fetches",
        meta,
        _id(),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("status", sa.Integer),
        sa.Column("meta", sa.Text, nullable=False, server_default=""),
        sa.Column("error", sa.Text),
        sa.Column("started_at", Real, nullable=False),
        sa.Column("duration", Real, nullable=False),
    )
    sa.Index("fetches_started", fetches.c.started_at)
    sa.Index("fetches_url", fetches.c.url)
    sa.Index("fetches_host_started", fetches.c.host, fetches.c.started_at)


def _index(meta: sa.MetaData, pg: bool) -> None:
    """The index: one row per fetched URL, its links, and link authority.

    A page's ``changed_at`` is when a fetch last found its content (status or body)
    different from the one before (NULL: never since its first fetch, or not known, in a
    row from before version 9); ``gone_at`` is when it went away (answered 51/52 or
    404/410, or its host vanished), NULL while it is live. ``charset_ok`` says whether a
    text page's body decodes by its declared charset (NULL: not a text page, or not
    known, in a row from before version 12)."""
    text_columns = (
        [
            sa.Column("headings", sa.Text),
            sa.Column("body", sa.Text),
            sa.Column("tsv", TSVECTOR, sa.Computed(TSV_EXPRESSION, persisted=True)),
        ]
        if pg
        else []
    )
    pages = sa.Table(
        "pages",
        meta,
        _id(),
        sa.Column("url", sa.Text, nullable=False, unique=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("meta", sa.Text, nullable=False),
        sa.Column("mime", sa.Text),
        sa.Column("lang", sa.Text),
        sa.Column("size", BigInt, nullable=False),
        sa.Column("content_hash", sa.Text),
        sa.Column("fetched_at", Real, nullable=False),
        sa.Column("title", sa.Text, nullable=False, server_default=""),
        sa.Column("duplicate_of", sa.Text),
        sa.Column("redirect_to", sa.Text),
        sa.Column("text_indexed", Flag, nullable=False, server_default=sa.false()),
        sa.Column("changed_at", Real),
        sa.Column("gone_at", Real),
        sa.Column("charset_ok", Flag),
        *text_columns,
    )
    sa.Index("pages_hash", pages.c.content_hash)
    sa.Index("pages_host", pages.c.host)
    for moment in (pages.c.changed_at, pages.c.gone_at):
        sa.Index(
            f"pages_{moment.name}",
            moment,
            sqlite_where=sa.text(f"{moment.name} IS NOT NULL"),
            postgresql_where=sa.text(f"{moment.name} IS NOT NULL"),
        )
    sa.Index(
        "pages_duplicate_of",
        pages.c.duplicate_of,
        sqlite_where=sa.text("duplicate_of IS NOT NULL"),
        postgresql_where=sa.text("duplicate_of IS NOT NULL"),
    )
    if pg:
        sa.Index("pages_tsv", pages.c.tsv, postgresql_using="gin")
    links = sa.Table(
        "links",
        meta,
        sa.Column(
            "page_id",
            BigInt,
            sa.ForeignKey("pages.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("label", sa.Text, nullable=False),
    )
    sa.Index("links_target", links.c.target)
    sa.Table(
        "authority",
        meta,
        sa.Column("url", sa.Text, primary_key=True),
        sa.Column("score", Real, nullable=False),
        sa.Column("weight", Real, nullable=False),
        sqlite_with_rowid=False,
    )


def _feeds(meta: sa.MetaData) -> None:
    """The feeds found while crawling (:mod:`geminibot.store.feedstore`) and their entries.

    A feed is keyed by the URL it was fetched at; ``entries`` counts its live entries and
    ``last_entry`` is the latest date among them. An entry is keyed by its feed and its URL
    (resolved against the feed); one the feed no longer lists is kept as history, with
    ``removed_at`` (NULL while the feed lists it)."""
    sa.Table(
        "feeds",
        meta,
        _id(),
        sa.Column("url", sa.Text, nullable=False, unique=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("format", sa.Text, nullable=False),
        sa.Column("title", sa.Text, nullable=False, server_default=""),
        sa.Column("author", sa.Text),
        sa.Column("first_seen", Real, nullable=False),
        sa.Column("fetched_at", Real, nullable=False),
        sa.Column("last_entry", Real),
        sa.Column("entries", sa.Integer, nullable=False, server_default=sa.text("0")),
    )
    entries = sa.Table(
        "feed_entries",
        meta,
        sa.Column(
            "feed_id",
            BigInt,
            sa.ForeignKey("feeds.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("url", sa.Text, primary_key=True),
        sa.Column("title", sa.Text, nullable=False, server_default=""),
        sa.Column("published", Real, nullable=False),
        sa.Column("first_seen", Real, nullable=False),
        sa.Column("removed_at", Real),
    )
    sa.Index("feed_entries_published", entries.c.published)
    sa.Index("feed_entries_url", entries.c.url)
