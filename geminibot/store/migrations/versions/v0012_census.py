"""Version 12: what a census reads beyond the crawl's own tables (``tls_history``: each
host's TLS version, cipher and certificate facts, a row per distinct set with when it was
first and last seen) and the censuses taken (``censuses``: each one's figures as JSON, for
``census --history``); and whether a text page's body decodes by its declared charset
(``pages.charset_ok``, NULL in older rows)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from geminibot.store.migrations.as_of import create_table
from geminibot.store.schema import Flag

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    op.add_column("pages", sa.Column("charset_ok", Flag))
    create_table("tls_history")
    create_table("censuses")
