"""Version 4: per host, its deep URLs (the trap bound of :mod:`geminibot.store.traps`;
NULL: not counted yet) and its requests failed in a row since its last answer, with the
first one's time (vanished hosts: :mod:`geminibot.store.freshness`)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from geminibot.store.schema import Real

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.add_column("hosts", sa.Column("deep_urls", sa.Integer))
    op.add_column(
        "hosts", sa.Column("failures", sa.Integer, nullable=False, server_default=sa.text("0"))
    )
    op.add_column("hosts", sa.Column("failing_since", Real))
