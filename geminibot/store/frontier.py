"""The frontier and visited set of an SQLite crawl database (table ``urls``): one row per
normalised URL the crawl ever met, ``queued``, ``leased`` (claimed), ``done``, ``refused``,
``failed``, ``gone`` or ``trapped``; a finished URL is queued again when it is due for a
revisit (:mod:`geminibot.store.freshness`).

What holds, each by its tests:

- a ``kill -9`` leaves only ``leased`` rows to repair: :meth:`Frontier.recover` queues
  them again (``tests/store/test_store_frontier.py``, ``tests/crawl/test_crawl_kill.py``);
- ``attempts`` counts the requests sent since the URL's last answer, a claim given back
  unsent counting none; a URL left leased after :data:`MAX_URL_ATTEMPTS` is given up as
  ``failed``, so one hostile page cannot stop every resume
  (``tests/store/test_store_attempts.py``);
- the trap bounds of :mod:`geminibot.store.traps` record a rejected URL as ``trapped``
  and a refusing decision (``trap: <bound>``), alike on both stores, the deep URLs of a
  host counted in ``hosts.deep_urls`` (``tests/store/test_store_traps.py``, the edges in
  ``tests/store/test_store_frontier.py``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, date, datetime

from geminibot.store import statements as q
from geminibot.store import traps
from geminibot.store.db import transaction
from geminibot.store.sqlite_sql import ENGINE
from geminibot.store.traps import CAP_REASON, FrontierLimits, trap_decision, trap_reason
from geminibot.urls import URL, host_key, host_of, parse_url

__all__ = ["Claim", "Frontier", "host_key"]

#: The statements compiled for SQLite.
SQL = ENGINE.sql

#: Attempts at one URL (requests sent) cut short (by a crash, or an error while processing
#: it) before the URL is given up and recorded failed.
MAX_URL_ATTEMPTS = 3


@dataclass(frozen=True)
class Claim:
    """A URL a worker holds the lease on."""

    url: str
    host: str
    depth: int


#: Query strings already on a (host, path), not trapped (searched in ``urls_query_path``,
#: which holds the URLs with a query string only).
QUERIES_ON_PATH = (
    "SELECT count(*) FROM urls WHERE host = ? AND path = ? AND has_query = 1 AND state != 'trapped'"
)
#: A host's oldest queued URL.
CLAIM = "SELECT url, depth FROM urls WHERE host = ? AND state = 'queued' ORDER BY id LIMIT 1"


def count_deep(paths: Iterable[Sequence[object]]) -> int:
    """The deep URLs (:func:`geminibot.store.traps.is_deep`) among rows of
    :data:`~geminibot.store.statements.DEEP_PATHS`."""
    return sum(traps.is_deep(str(row[0])) for row in paths)


def utc_date(timestamp: float) -> date:
    """The UTC date of a crawl clock's epoch seconds (the calendar trap's "today")."""
    return datetime.fromtimestamp(timestamp, UTC).date()


class Frontier:
    """Queue operations over the ``urls`` table; ``clock`` gives wall-clock seconds."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        clock: Callable[[], float],
        limits: FrontierLimits | None = None,
    ) -> None:
        self.conn = conn
        self.clock = clock
        self.limits = limits or FrontierLimits()

    # --- writes that belong to a larger transaction (the caller holds it) ---

    def add(self, url: str, depth: int, parent: str | None = None) -> str:
        """Put a normalised ``gemini://`` or ``http(s)://`` URL in the frontier; call inside a
        transaction.

        Returns ``"queued"``, ``"known"`` (already seen, in any state) or
        ``"trapped: <bound>"`` (recorded, never fetched).
        """
        return self._add(url, depth, parent)[0]

    def _add(self, url: str, depth: int, parent: str | None) -> tuple[str, str]:
        """:meth:`add`, and the URL's host key. A URL the table holds as it is given is
        known without being parsed (the table holds normalised URLs only, and normalising
        a normalised URL gives it back): most links of a page are."""
        conn = self.conn
        known = conn.execute(SQL[q.URL_STATE], {"url": url}).fetchone()
        parsed = None
        if known is None:
            parsed = parse_url(url)
            if str(parsed) != url:  # normalised (geminibot.urls, RFC 3986 6.2.2) first
                url = str(parsed)
                known = conn.execute(SQL[q.URL_STATE], {"url": url}).fetchone()
        if known is not None:
            if known[0] == "trapped" and str(known[1]).endswith(CAP_REASON):
                parsed = parse_url(url)
                host = host_of(parsed)
                if self._room(host):
                    # the per-host cap counts live URLs: room again, so the URL is queued now
                    conn.execute(SQL[q.REQUEUE_CAPPED], {"now": self.clock(), "url": url})
                    self._count_queued(host, parsed.path)
                    return "queued", host
            return "known", ""
        assert parsed is not None
        host, path, has_query = host_of(parsed), parsed.path, parsed.query is not None
        now = self.clock()
        conn.execute(
            "INSERT INTO hosts (host, first_seen) VALUES (?, ?) ON CONFLICT (host) DO NOTHING",
            (host, now),
        )
        reason = self._trap(parsed, host, depth)
        state = "trapped" if reason else "queued"
        conn.execute(
            "INSERT INTO urls (url, host, path, has_query, depth, parent, state, reason,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (url, host, path, int(has_query), depth, parent, state, reason, now),
        )
        if reason:
            decision = {"url": url, "host": host, "allowed": False, "at": now}
            conn.execute(SQL[q.LOG_DECISION], {**decision, "reason": trap_decision(reason)})
            return f"trapped: {reason}", host
        self._count_queued(host, path)
        return "queued", host

    def _count_queued(self, host: str, path: str) -> None:
        """One more live URL on ``host`` (a deep one counted as such, once counted)."""
        self.conn.execute(
            "UPDATE hosts SET urls_total = urls_total + 1, deep_urls = deep_urls + ?"
            " WHERE host = ?",
            (int(traps.is_deep(path)), host),
        )

    def _trap(self, url: URL, host: str, depth: int) -> str | None:
        path = url.path
        (total,) = self.conn.execute(
            "SELECT urls_total FROM hosts WHERE host = ?", (host,)
        ).fetchone()
        queries = None
        if url.query is not None:
            (queries,) = self.conn.execute(QUERIES_ON_PATH, (host, path)).fetchone()
        deep = self._deep_on(host) if traps.is_deep(path) else None
        today = utc_date(self.clock())
        known = self._known(traps.calendar_neighbours(url, today))
        return trap_reason(
            self.limits, url, depth, total, queries, today=today, deep_on_host=deep, known=known
        )

    def _known(self, urls: Collection[str]) -> set[str]:
        """Those of ``urls`` the frontier holds (in any state)."""
        if not urls:
            return set()
        marks = ",".join("?" * len(urls))
        rows = self.conn.execute(f"SELECT url FROM urls WHERE url IN ({marks})", list(urls))
        return {str(row[0]) for row in rows}

    def _deep_on(self, host: str) -> int:
        """The host's deep URLs that are not trapped (``hosts.deep_urls``, counted from
        its rows the first time)."""
        (deep,) = self.conn.execute(
            "SELECT deep_urls FROM hosts WHERE host = ?", (host,)
        ).fetchone()
        if deep is None:
            deep = count_deep(self.conn.execute(SQL[q.DEEP_PATHS], {"host": host}))
            self.conn.execute("UPDATE hosts SET deep_urls = ? WHERE host = ?", (deep, host))
        return int(deep)

    def _room(self, host: str) -> bool:
        """Whether ``host`` has fewer live URLs (``hosts.urls_total``: queued, leased,
        done, refused or failed; not trapped, not gone) than the per-host cap."""
        row = self.conn.execute("SELECT urls_total FROM hosts WHERE host = ?", (host,)).fetchone()
        return row is None or int(row[0]) < self.limits.max_urls_per_host

    def finish(self, url: str, state: str, reason: str | None = None) -> None:
        """Close a leased URL as done/refused/failed/gone; call inside a transaction. Only
        a failure keeps the URL's attempts counted."""
        params = {
            "state": state,
            "reason": reason,
            "now": self.clock(),
            "failed": state == "failed",
        }
        self.conn.execute(SQL[q.FINISH], {**params, "url": url})

    # --- self-contained transactions ---

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """The transaction a self-contained operation runs in (committed when it ends)."""
        return transaction(self.conn)

    def seed(self, urls: list[str]) -> dict[str, str]:
        """Add seed URLs (depth 0) in one transaction; returns what happened to each."""
        with self._tx():
            return {url: self.add(url, 0) for url in urls}

    def recover(self) -> int:
        """Return leases left by a killed run to the queue, except those of URLs whose
        attempts were cut short :data:`MAX_URL_ATTEMPTS` times (recorded failed); returns
        how many went back to the queue."""
        with self._tx():
            return self._recover()

    def _recover(self) -> int:
        """:meth:`recover` inside the caller's transaction."""
        self.conn.execute(
            "UPDATE urls SET state = 'failed', lease = NULL, updated_at = ?, next_visit = NULL,"
            " reason = 'given up: ' || attempts || ' attempts ended abnormally'"
            " WHERE state = 'leased' AND attempts >= ?",
            (self.clock(), MAX_URL_ATTEMPTS),
        )
        cur = self.conn.execute(
            "UPDATE urls SET state = 'queued', lease = NULL WHERE state = 'leased'"
        )
        return cur.rowcount

    def claim(self, host: str, lease: str) -> Claim | None:
        """Lease the oldest queued URL of ``host`` (one transaction), or None if none."""
        with self._tx():
            return self._claim(host, lease)

    def _claim(self, host: str, lease: str) -> Claim | None:
        """:meth:`claim` inside the caller's transaction."""
        row = self.conn.execute(CLAIM, (host,)).fetchone()
        if row is None:
            return None
        self.conn.execute(SQL[q.MARK_LEASED], {"lease": lease, "now": self.clock(), "url": row[0]})
        return Claim(url=row[0], host=host, depth=int(row[1]))

    # --- reads ---

    def hosts_with_work(self) -> dict[str, int]:
        """Hosts with queued URLs, oldest work first, with how many each."""
        rows = self.conn.execute(SQL[q.HOSTS_WITH_WORK]).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    def queued(self) -> int:
        return int(self.conn.execute(SQL[q.COUNT_QUEUED]).fetchone()[0])

    def leased(self) -> list[str]:
        rows = self.conn.execute(SQL[q.LEASED])
        return [str(r[0]) for r in rows.fetchall()]

    def state_of(self, url: str) -> tuple[str, str | None] | None:
        row = self.conn.execute(SQL[q.URL_STATE], {"url": url}).fetchone()
        return None if row is None else (str(row[0]), row[1])
