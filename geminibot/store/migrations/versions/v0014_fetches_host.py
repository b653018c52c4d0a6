"""Version 14: the index of ``fetches`` by host and time, that ``why`` and ``/check``
read a host's newest requests through (the longest wait between two: ``lookups.WAITS``)
instead of scanning the whole log backwards (its cost to a crawl's store and its gain:
docs/benchmarks.md)."""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    op.create_index("fetches_host_started", "fetches", ["host", "started_at"])
