"""Version 2: attempts per URL cut short (:data:`~geminibot.store.frontier.MAX_URL_ATTEMPTS`)
and certificate pins (trust on first use) per Gemini host and port, kept between runs."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from geminibot.store.schema import Real

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.add_column(
        "urls", sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0"))
    )
    op.create_table(
        "pins",
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("port", sa.Integer, primary_key=True),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("first_seen", Real, nullable=False),
    )
