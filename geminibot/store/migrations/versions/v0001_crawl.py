"""Version 1: the crawl (settings, hosts, frontier, policy files, decisions, requests) and
its index (pages, links, the full-text index: FTS5 on SQLite, a ``tsvector`` on
PostgreSQL, where ``host_leases`` lets several processes share hosts).

The tables are made from the schema's metadata (:func:`geminibot.store.schema.metadata`)
as it was at version 1: :data:`V1_COLUMNS` names the tables and columns there were (each
column is as the schema describes it today: no later version changed one), and the
indexes are those of :data:`V1_INDEXES`, two of which version 5 dropped.
"""

from __future__ import annotations

from alembic import op

from geminibot.store.migrations.as_of import create_table
from geminibot.store.schema import PAGES_FTS

revision = "0001"
down_revision = None

_ALL = ()
#: The tables of version 1, in the order they were made, with the columns each had then
#: (``()``: all the schema has today); ``host_leases`` is PostgreSQL's only.
V1_COLUMNS: dict[str, tuple[str, ...]] = {
    "settings": _ALL,
    "hosts": (
        "host",
        "first_seen",
        "last_fetch_at",
        "last_duration",
        "slow_downs",
        "not_before",
        "urls_total",
        "skipped_reason",
    ),
    "host_leases": _ALL,
    "urls": (
        "id",
        "url",
        "host",
        "path",
        "has_query",
        "depth",
        "parent",
        "state",
        "reason",
        "lease",
        "updated_at",
    ),
    "robots": _ALL,
    "decisions": _ALL,
    "fetches": _ALL,
    "pages": (
        "id",
        "url",
        "host",
        "status",
        "meta",
        "mime",
        "lang",
        "size",
        "content_hash",
        "fetched_at",
        "title",
        "duplicate_of",
        "redirect_to",
        "text_indexed",
        "headings",
        "body",
        "tsv",
    ),
    "links": _ALL,
}
#: The indexes of version 1 (table, name, columns); ``pages_tsv`` is PostgreSQL's only.
V1_INDEXES = (
    ("urls", "urls_host_state", ("host", "state", "id")),
    ("urls", "urls_state", ("state",)),
    ("urls", "urls_host_path", ("host", "path", "has_query")),
    ("decisions", "decisions_url", ("url",)),
    ("pages", "pages_hash", ("content_hash",)),
    ("pages", "pages_host", ("host",)),
)


def upgrade() -> None:
    for name, columns in V1_COLUMNS.items():
        if not create_table(name, columns):
            continue  # (another engine's table)
        for index_table, index, on in V1_INDEXES:
            if index_table == name:
                op.create_index(index, name, list(on))
    if op.get_bind().dialect.name == "postgresql":
        op.create_index("pages_tsv", "pages", ["tsv"], postgresql_using="gin")
    else:
        op.execute(PAGES_FTS)
