"""Version 5: fewer index writes per URL and per page (docs/benchmarks.md): no query
reads ``decisions`` by URL, and only URLs with a query string are counted per path
(:mod:`geminibot.store.frontier`; a host's paths are read through ``urls_host_state``)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.drop_index("decisions_url", "decisions")
    op.drop_index("urls_host_path", "urls")
    op.create_index(
        "urls_query_path",
        "urls",
        ["host", "path"],
        sqlite_where=sa.text("has_query = 1"),
        postgresql_where=sa.text("has_query"),
    )
