"""Version 11: "not found" is not "gone". A URL that answers Gemini ``51`` or HTTP ``404``
is asked again on a growing interval (state ``not_found``; :mod:`geminibot.store.freshness`)
and counts its not-found answers in a row (``urls.misses``, since ``urls.missing_since``);
only ``52``/``410`` is ``gone``, never asked again on its own, its ``next_visit`` NULL
(``geminibot recheck`` sets it).

The URLs an older geminibot recorded ``gone`` for a ``51``/``404`` become ``not_found``,
their pages already out of the index (as many misses as it takes to leave it), due a day
after their last answer; their hosts count them as live URLs again."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from geminibot.store.schema import Real

revision = "0011"
down_revision = "0010"

#: Seconds after its last answer an old ``gone`` URL that was not found is due again.
DAY = 86_400.0
#: The misses an old not-found URL is given (the rule's count: out of the index already).
MISSES = 3
#: The URLs recorded gone whose page answered "not found" (Gemini 51, HTTP 404).
NOT_FOUND = "state = 'gone' AND url IN (SELECT p.url FROM pages p WHERE p.status IN (51, 404))"


def upgrade() -> None:
    op.add_column("urls", sa.Column("misses", sa.Integer, nullable=False, server_default="0"))
    op.add_column("urls", sa.Column("missing_since", Real))
    op.execute(
        "UPDATE hosts SET urls_total = urls_total + (SELECT count(*) FROM urls"
        f" WHERE urls.host = hosts.host AND {NOT_FOUND})"
        f" WHERE host IN (SELECT host FROM urls WHERE {NOT_FOUND})"
    )
    op.execute(
        f"UPDATE urls SET state = 'not_found', misses = {MISSES}, missing_since = updated_at,"
        f" next_visit = updated_at + {DAY} WHERE {NOT_FOUND}"
    )
    op.execute("UPDATE urls SET next_visit = NULL WHERE state = 'gone'")
