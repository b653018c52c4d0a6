"""The censuses kept in the store (``censuses``: each one's figures as JSON, dated)."""

from __future__ import annotations

import json

from geminibot.census.model import Census
from geminibot.census.sql import run
from geminibot.store.database import Database

#: Most censuses read back for ``--history`` (the newest).
MAX_HISTORY = 1_000


def kept_censuses(conn: Database, limit: int = MAX_HISTORY) -> list[Census]:
    """The whole-crawl censuses kept in the store, oldest first."""
    rows = run(conn, f"SELECT figures FROM censuses ORDER BY taken_at DESC LIMIT {int(limit)}")
    return [Census.from_json(json.loads(str(r[0]))) for r in reversed(rows)]


def keep(conn: Database, census: Census) -> None:
    """Keep ``census`` in the store (``censuses``)."""
    params = {"at": census.taken_at, "figures": json.dumps(census.as_json(), sort_keys=True)}
    conn.query("INSERT INTO censuses (taken_at, figures) VALUES (:at, :figures)", params)


def agent_of(conn: Database, given: str | None = None) -> str:
    """The product token whose refusals a census counts: ``given``, else the crawl's own
    (its ``agent`` setting), else ``geminibot``."""
    if given:
        return given
    rows = run(conn, "SELECT value FROM settings WHERE key = 'agent'")
    return str(rows[0][0]) if rows else "geminibot"
