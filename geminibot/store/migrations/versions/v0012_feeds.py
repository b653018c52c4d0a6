"""Version 12: the feeds found while crawling (``feeds``) and their entries
(``feed_entries``, an entry no longer listed kept with ``removed_at``): see
:func:`geminibot.store.schema.metadata` and docs/feeds.md.

(Numbered 12 after version 11, made at the same time on another branch; until both are
merged its parent is version 10.)"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from geminibot.store.schema import BigInt, Real

revision = "0012"
down_revision = "0010"


def upgrade() -> None:
    op.create_table(
        "feeds",
        sa.Column("id", BigInt, sa.Identity(always=True), primary_key=True),
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
    op.create_table(
        "feed_entries",
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
    op.create_index("feed_entries_published", "feed_entries", ["published"])
    op.create_index("feed_entries_url", "feed_entries", ["url"])
