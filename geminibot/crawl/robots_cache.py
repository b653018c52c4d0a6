"""The per-host cache of policy files (robots.txt and friends) in the crawl database.

Each row keeps the RFC 9309 outcome of one fetch (success, unavailable, unreachable), the
body when there was one, and when it expires: at most :data:`MAX_CACHE_SECONDS` (24 h)
after the fetch, sooner when the outcome says so (an unreachable robots.txt is retried
after ``FetchOutcome.retry_after``). A resumed crawl reuses what is still fresh, so it does
not fetch robots.txt again.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from geminibot.policy import FetchOutcome
from geminibot.policy.outcomes import MAX_CACHE_SECONDS


@dataclass(frozen=True)
class CachedFile:
    host: str
    name: str  # "robots.txt", ...
    outcome: FetchOutcome
    status: int | None
    body: bytes | None
    fetched_at: float
    expires_at: float


def load(conn: sqlite3.Connection, host: str, name: str, now: float) -> CachedFile | None:
    """The cached fetch of ``name`` on ``host`` if it is still fresh at ``now``."""
    row = conn.execute(
        "SELECT outcome, reason, status, body, fetched_at, expires_at FROM robots"
        " WHERE host = ? AND name = ?",
        (host, name),
    ).fetchone()
    if row is None or row[5] <= now:
        return None
    kind, reason, status, body, fetched_at, expires_at = row
    outcome = FetchOutcome(kind, reason, None, expires_at - fetched_at)
    return CachedFile(host, name, outcome, status, body, fetched_at, expires_at)


def save(
    conn: sqlite3.Connection,
    host: str,
    name: str,
    now: float,
    outcome: FetchOutcome,
    status: int | None,
    body: bytes | None,
) -> CachedFile:
    """Record a fetch outcome (call inside a transaction); replaces any older row."""
    expires = now + min(outcome.cache_seconds, MAX_CACHE_SECONDS)
    conn.execute(
        "INSERT INTO robots (host, name, fetched_at, expires_at, outcome, reason, status, body)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (host, name) DO UPDATE SET"
        " fetched_at = excluded.fetched_at, expires_at = excluded.expires_at,"
        " outcome = excluded.outcome, reason = excluded.reason, status = excluded.status,"
        " body = excluded.body",
        (host, name, now, expires, outcome.kind, outcome.reason, status, body),
    )
    return CachedFile(host, name, outcome, status, body, now, expires)
