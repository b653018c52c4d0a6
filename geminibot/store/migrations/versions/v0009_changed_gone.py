"""Version 9: when a page last changed and when it went away (``pages.changed_at``,
``pages.gone_at``), for "changed and gone in the last day" (``geminibot stats``,
``/stats``), each with a partial index so that counting them reads only those rows. An
older row's last change is not known (NULL); a page whose URL is gone went away when the
URL was last closed (``urls.updated_at``), as the figure was counted before."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from geminibot.store.schema import Real

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    op.add_column("pages", sa.Column("changed_at", Real))
    op.add_column("pages", sa.Column("gone_at", Real))
    op.execute(
        "UPDATE pages SET gone_at = (SELECT u.updated_at FROM urls u"
        " WHERE u.url = pages.url AND u.state = 'gone')"
        " WHERE url IN (SELECT url FROM urls WHERE state = 'gone')"
    )
    for column in ("changed_at", "gone_at"):
        op.create_index(
            f"pages_{column}",
            "pages",
            [column],
            sqlite_where=sa.text(f"{column} IS NOT NULL"),
            postgresql_where=sa.text(f"{column} IS NOT NULL"),
        )
