"""Version 7: link authority (:mod:`geminibot.index.authority`) and the index of link
targets that backlinks (``serve-search``) look up, made by the commands that needed them
until now (so either may exist already); the version lives in ``alembic_version`` on
both engines (PostgreSQL's own ``geminibot_schema`` goes)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from geminibot.store.schema import Real

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    have = sa.inspect(op.get_bind())
    if not have.has_table("authority"):
        op.create_table(
            "authority",
            sa.Column("url", sa.Text, primary_key=True),
            sa.Column("score", Real, nullable=False),
            sa.Column("weight", Real, nullable=False),
            sqlite_with_rowid=False,
        )
    if "links_target" not in {index["name"] for index in have.get_indexes("links")}:
        op.create_index("links_target", "links", ["target"])
    op.execute("DROP TABLE IF EXISTS geminibot_schema")
