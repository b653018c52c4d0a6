"""Version 3: freshness (docs/crawl.md): when each finished URL is due again and its
learned revisit interval; ``attempts`` also counts failed requests in a row. Rows of an
older database are due one day after their last change (a failure: one hour, with one
attempt counted; one given up: never)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from geminibot.store.schema import Real

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.add_column("urls", sa.Column("next_visit", Real))
    op.add_column("urls", sa.Column("revisit_interval", Real))
    op.execute(
        "UPDATE urls SET next_visit = updated_at + 86400, attempts = 0"
        " WHERE state IN ('done', 'refused')"
    )
    op.execute(
        "UPDATE urls SET next_visit = updated_at + 3600,"
        " attempts = CASE WHEN attempts > 1 THEN attempts ELSE 1 END"
        " WHERE state = 'failed' AND coalesce(reason, '') NOT LIKE 'given up:%'"
    )
    op.create_index(
        "urls_next_visit",
        "urls",
        ["next_visit"],
        sqlite_where=sa.text("next_visit IS NOT NULL"),
        postgresql_where=sa.text("next_visit IS NOT NULL"),
    )
    op.create_index(
        "pages_duplicate_of",
        "pages",
        ["duplicate_of"],
        sqlite_where=sa.text("duplicate_of IS NOT NULL"),
        postgresql_where=sa.text("duplicate_of IS NOT NULL"),
    )
    op.create_index("fetches_started", "fetches", ["started_at"])
    op.create_index("decisions_at", "decisions", ["at"])
