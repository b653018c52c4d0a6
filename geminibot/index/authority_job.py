"""Link authority computed again on a schedule and applied to search without a rebuild.

:func:`refresh` computes authority into either store
(:func:`~geminibot.index.authority.compute_authority`) and, on SQLite, gives the new
weights to the derived index (:func:`~geminibot.index.tantivy_index.apply_weights`): its
searches apply them from their next query, and no document is re-added. PostgreSQL's
search reads the ``authority`` table at each query, so there the new weights apply as
their transaction commits. :func:`schedule` calls a job every ``interval`` seconds on an
injected clock, the first time when the store's last computation is that old
(``geminibot index authority --every SECONDS``; the service's ``authority_every``).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from geminibot.index.authority import compute_authority

#: Seconds before a job that found nothing to do (no pages yet) is tried again, when the
#: interval is longer.
IDLE_RETRY = 60.0


def refresh(
    conn: Any, trusted: list[str] | None, progress: Callable[[str], None] | None = None
) -> dict[str, object] | None:
    """Compute authority into the store of ``conn`` (either store's connection) and
    apply it to search; a summary (pages, hosts, host links, trusted hosts, where it
    was applied, seconds), or None when the store has no page with text yet."""
    pages = int(conn.execute("SELECT count(*) FROM pages WHERE text_indexed").fetchone()[0])
    if not pages:
        return None
    if isinstance(conn, sqlite3.Connection):
        from geminibot.index.tantivy_index import apply_weights

        summary = compute_authority(conn, trusted, progress)
        hosts = apply_weights(conn)
        applied = "no search index yet" if hosts is None else "search index"
    else:
        from geminibot.index.authority import write_postgres

        summary = compute_authority(conn, trusted, progress, write_postgres)
        applied = "postgresql"
    return {
        "pages": pages,
        "hosts": int(summary["hosts"]),
        "host_links": int(summary["links"]),
        "trusted_hosts": int(summary["trusted"]) or "all",
        "applied_to": applied,
        "seconds": round(float(summary["seconds"]), 2),
    }


def schedule(
    job: Callable[[], bool],
    interval: float,
    last: float | None,
    stopping: Callable[[], bool],
    wait: Callable[[float], object],
    clock: Callable[[], float] = time.time,
) -> int:
    """Call ``job()`` every ``interval`` seconds of ``clock`` until ``stopping()``; returns
    how many times it ran. The first call is due ``interval`` after ``last`` (the store's
    last computation; at once when None, and never later than ``interval`` from now);
    ``wait(seconds)`` sleeps (a stop may cut it short). A job that returns False (it
    found nothing to do) is tried again after at most :data:`IDLE_RETRY` seconds."""
    now = clock()
    due = now if last is None else min(last + interval, now + interval)
    runs = 0
    while not stopping():
        left = due - clock()
        if left > 0:
            wait(left)
            continue
        started = clock()
        done = job()
        runs += 1
        due = started + (interval if done else min(interval, IDLE_RETRY))
    return runs
