"""The censuses kept in the store (``censuses``: each one's figures as JSON, dated)."""

from __future__ import annotations

import json

from geminibot.census.model import Census
from geminibot.store import census_reads
from geminibot.store.database import Database

#: Most censuses read back for ``--history`` (the newest).
MAX_HISTORY = 1_000


def kept_censuses(conn: Database, limit: int = MAX_HISTORY) -> list[Census]:
    """The whole-crawl censuses kept in the store, oldest first."""
    return [Census.from_json(json.loads(figures)) for figures in census_reads.kept(conn, limit)]


def keep(conn: Database, census: Census) -> None:
    """Keep ``census`` in the store (``censuses``)."""
    census_reads.keep(conn, census.taken_at, json.dumps(census.as_json(), sort_keys=True))


def agent_of(conn: Database, given: str | None = None) -> str:
    """The product token whose refusals a census counts: ``given``, else the crawl's own
    (its ``agent`` setting), else ``geminibot``."""
    if given:
        return given
    kept = conn.setting("agent")
    return "geminibot" if kept is None else kept
