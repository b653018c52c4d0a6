"""Version 6: the searchable set's change log on SQLite, for the derived search index that
follows the store (:mod:`geminibot.index.updater`): a page's id each time it enters or
leaves the searchable text (``text_indexed``): written, replaced, delisted, deleted. Its
sequence never reuses a number (AUTOINCREMENT), so the index records the last one it
applied; the updater deletes the rows it has applied. PostgreSQL has no derived index."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"

TRIGGERS = (
    "CREATE TRIGGER pages_text_added AFTER INSERT ON pages WHEN new.text_indexed"
    " BEGIN INSERT INTO index_changes (page_id) VALUES (new.id); END",
    "CREATE TRIGGER pages_text_removed AFTER DELETE ON pages WHEN old.text_indexed"
    " BEGIN INSERT INTO index_changes (page_id) VALUES (old.id); END",
    "CREATE TRIGGER pages_text_changed AFTER UPDATE OF text_indexed, title ON pages"
    " WHEN old.text_indexed OR new.text_indexed"
    " BEGIN INSERT INTO index_changes (page_id) VALUES (new.id); END",
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.create_table(
        "index_changes",
        sa.Column("seq", sa.INTEGER, primary_key=True),
        sa.Column("page_id", sa.INTEGER, nullable=False),
        sqlite_autoincrement=True,
    )
    for trigger in TRIGGERS:
        op.execute(trigger)
