"""Version 15: a URL submitted (``/submit``) or rechecked by name (``geminibot recheck
URL``) is claimed before its host's other queued URLs (``urls.priority``, 1 until it is
fetched), the claim still one index scan: ``urls_host_state`` is made again with the
priority between the state and the id, highest first (docs/crawl.md, "Claim order")."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    op.add_column("urls", sa.Column("priority", sa.Integer, nullable=False, server_default="0"))
    op.drop_index("urls_host_state", "urls")
    op.create_index("urls_host_state", "urls", ["host", "state", sa.text("priority DESC"), "id"])
