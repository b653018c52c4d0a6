"""Version 8: the index of ``fetches`` by URL, that ``why`` and ``/check`` read a page's
last answers through (its cost to a crawl's store is within the run-to-run spread:
docs/benchmarks.md)."""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    op.create_index("fetches_url", "fetches", ["url"])
