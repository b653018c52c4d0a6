"""Version 12: what a census reads beyond the crawl's own tables (``tls_history``: each
host's TLS version, cipher and certificate facts, a row per distinct set with when it was
first and last seen) and the censuses taken (``censuses``: each one's figures as JSON, for
``census --history``); and whether a text page's body decodes by its declared charset
(``pages.charset_ok``, NULL in older rows)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from geminibot.store.schema import BigInt, Flag, Real

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    op.add_column("pages", sa.Column("charset_ok", Flag))
    op.create_table(
        "tls_history",
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
    op.create_table(
        "censuses",
        sa.Column("id", BigInt, sa.Identity(always=True), primary_key=True),
        sa.Column("taken_at", Real, nullable=False),
        sa.Column("figures", sa.Text, nullable=False),
    )
