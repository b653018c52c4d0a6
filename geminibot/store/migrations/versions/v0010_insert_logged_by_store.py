"""Version 10: a page entering the searchable text is logged in ``index_changes`` by the
statement that inserts it (:func:`geminibot.store.pages.store_page`), not by a trigger; a
deletion or an update of ``text_indexed`` or ``title`` still is (triggers: a page may be
deleted by hand).

An ``AFTER INSERT`` trigger on ``pages`` makes each insert a statement transaction, and
SQLite opens a savepoint for it; FTS5 writes its pending terms to a new segment at every
savepoint. With the trigger, a crawl's transaction of many new pages wrote a segment per
page instead of one per transaction (docs/benchmarks.md has the figures). PostgreSQL has
no change log."""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("DROP TRIGGER pages_text_added")
