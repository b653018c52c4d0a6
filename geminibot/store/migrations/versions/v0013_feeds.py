"""Version 13: the feeds found while crawling (``feeds``) and their entries
(``feed_entries``, an entry no longer listed kept with ``removed_at``): see
:func:`geminibot.store.schema.metadata` and docs/feeds.md."""

from __future__ import annotations

from alembic import op

from geminibot.store.migrations.as_of import create_table

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    create_table("feeds")
    create_table("feed_entries")
    op.create_index("feed_entries_published", "feed_entries", ["published"])
    op.create_index("feed_entries_url", "feed_entries", ["url"])
