"""Version 1: the crawl (settings, hosts, frontier, policy files, decisions, requests) and
its index (pages, links, the full-text index: FTS5 on SQLite, a ``tsvector`` on
PostgreSQL, where ``host_leases`` lets several processes share hosts)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

from geminibot.store.schema import PAGES_FTS, TSV_EXPRESSION, BigInt, Flag, Real

revision = "0001"
down_revision = None


def _id() -> sa.Column[int]:
    return sa.Column("id", BigInt, sa.Identity(always=True), primary_key=True)


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "settings",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.create_table(
        "hosts",
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("first_seen", Real, nullable=False),
        sa.Column("last_fetch_at", Real),
        sa.Column("last_duration", Real),
        sa.Column("slow_downs", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("not_before", Real, nullable=False, server_default=sa.text("0")),
        sa.Column("urls_total", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("skipped_reason", sa.Text),
    )
    if pg:
        op.create_table(
            "host_leases",
            sa.Column("host", sa.Text, primary_key=True),
            sa.Column("holder", sa.Text),
            sa.Column("lease_until", Real, nullable=False, server_default=sa.text("0")),
        )
    op.create_table(
        "urls",
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
    )
    op.create_index("urls_host_state", "urls", ["host", "state", "id"])
    op.create_index("urls_state", "urls", ["state"])
    op.create_index("urls_host_path", "urls", ["host", "path", "has_query"])
    op.create_table(
        "robots",
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("fetched_at", Real, nullable=False),
        sa.Column("expires_at", Real, nullable=False),
        sa.Column("outcome", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("status", sa.Integer),
        sa.Column("body", sa.LargeBinary),
    )
    op.create_table(
        "decisions",
        _id(),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("allowed", Flag, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("at", Real, nullable=False),
    )
    op.create_index("decisions_url", "decisions", ["url"])
    op.create_table(
        "fetches",
        _id(),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("status", sa.Integer),
        sa.Column("meta", sa.Text, nullable=False, server_default=""),
        sa.Column("error", sa.Text),
        sa.Column("started_at", Real, nullable=False),
        sa.Column("duration", Real, nullable=False),
    )
    text_columns = (
        [
            sa.Column("headings", sa.Text),
            sa.Column("body", sa.Text),
            sa.Column("tsv", TSVECTOR, sa.Computed(TSV_EXPRESSION, persisted=True)),
        ]
        if pg
        else []
    )
    op.create_table(
        "pages",
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
        *text_columns,
    )
    op.create_index("pages_hash", "pages", ["content_hash"])
    op.create_index("pages_host", "pages", ["host"])
    if pg:
        op.create_index("pages_tsv", "pages", ["tsv"], postgresql_using="gin")
    op.create_table(
        "links",
        sa.Column(
            "page_id", BigInt, sa.ForeignKey("pages.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("label", sa.Text, nullable=False),
    )
    if not pg:
        op.execute(PAGES_FTS)
