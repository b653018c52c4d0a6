"""The PostgreSQL engine of the crawl database's statements
(:mod:`geminibot.store.statements`): its compiler (psycopg's ``%(name)s`` placeholders)
and what only PostgreSQL runs. The full-text index is the generated ``pages.tsv`` over
``pages.headings`` and ``pages.body``; several crawl processes share hosts through
``host_leases`` and lock rows in one order (:mod:`geminibot.store.pgstore`)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import psycopg

from geminibot.store.statements import Compiled, Engine, add_page, linked_files

#: Every host's skip of the last run cleared, the rows locked in host order (as every
#: transaction that adds URLs locks them: no two deadlock).
CLEAR_SKIPS = sa.text(
    "UPDATE hosts SET skipped_reason = NULL WHERE host IN (SELECT host FROM hosts"
    " WHERE skipped_reason IS NOT NULL ORDER BY host FOR UPDATE)"
)

ENGINE = Engine(
    name="postgresql",
    sql=Compiled(
        psycopg.dialect(),  # type: ignore[no-untyped-call]  # (untyped __init__)
        psycopg.dialect(paramstyle="format"),  # type: ignore[no-untyped-call]
    ),
    drop_text=sa.text("UPDATE pages SET headings = NULL, body = NULL WHERE id = :id"),
    clear_skips=CLEAR_SKIPS,
    page_text=sa.text(
        "SELECT url, host, title, headings, body FROM pages WHERE text_indexed ORDER BY id"
    ),
    add_page=add_page(("headings", "body")),
    linked_files=linked_files("p.body"),
    replace_text=(
        sa.text(
            "UPDATE pages SET title = :title, headings = :headings, body = :body WHERE id = :id"
        ),
    ),
)
