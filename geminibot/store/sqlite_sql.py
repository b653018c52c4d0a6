"""The SQLite engine of the crawl database's statements (:mod:`geminibot.store.statements`):
its compiler (``:name`` placeholders, as the sqlite3 module reads them from a dict) and
what only SQLite runs. The full-text index is the FTS5 table ``pages_fts``, one row per
indexed page (``rowid`` = ``pages.id``)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from geminibot.store.statements import Compiled, Engine, add_page, linked_files

#: Every host's skip of the last run cleared (one process per SQLite database).
CLEAR_SKIPS = sa.text("UPDATE hosts SET skipped_reason = NULL")

DROP_TEXT = sa.text("DELETE FROM pages_fts WHERE rowid = :id")
ADD_TEXT = (
    sa.text(
        "INSERT INTO pages_fts (rowid, title, headings, body, url)"
        " VALUES (:id, :title, :headings, :body, :url)"
    ),
    # (logged here, not by a trigger: the version 10 migration says why)
    sa.text("INSERT INTO index_changes (page_id) VALUES (:id)"),
)

ENGINE = Engine(
    name="sqlite",
    sql=Compiled(sqlite.dialect(paramstyle="named"), sqlite.dialect(paramstyle="qmark")),
    drop_text=DROP_TEXT,
    clear_skips=CLEAR_SKIPS,
    page_text=sa.text(
        "SELECT p.url, p.host, p.title, f.headings, f.body FROM pages p"
        " JOIN pages_fts f ON f.rowid = p.id WHERE p.text_indexed ORDER BY p.id"
    ),
    add_page=add_page(),
    linked_files=linked_files("(SELECT body FROM pages_fts WHERE rowid = p.id)"),
    replace_text=(
        # (a new title is logged by a trigger as well: the updater applies a page once)
        sa.text("UPDATE pages SET title = :title WHERE id = :id AND title != :title"),
        DROP_TEXT,
        *ADD_TEXT,
    ),
    add_text=ADD_TEXT,
)
