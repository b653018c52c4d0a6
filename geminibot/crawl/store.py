"""Everything a crawl keeps: one interface (:class:`CrawlStore`), one SQLite implementation.

The crawl loop, its scheduler and its adapters hold no SQL: they call the methods below,
each one transaction (a page, its links and the new frontier rows are committed together;
so are a refusal and its decision). Another engine (PostgreSQL) implements the same
:class:`CrawlStore`; :class:`SqliteStore` is the SQLite one, on the schema of
:mod:`geminibot.index.db` (an existing crawl database resumes unchanged).

Times are wall-clock seconds from the injected clock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from geminibot.crawl.frontier import Claim, Frontier, Limits
from geminibot.crawl.schemes import host_key
from geminibot.index import Page, store_page, transaction
from geminibot.index.db import get_setting, set_setting
from geminibot.index.pages import find_by_hash
from geminibot.policy import FetchOutcome
from geminibot.policy.outcomes import MAX_CACHE_SECONDS


@dataclass(frozen=True)
class HostState:
    """A host's politeness state as persisted: last request's end and duration, the
    earliest next request (44 back-off) and the count of consecutive slow-downs."""

    last_end: float | None
    last_duration: float
    not_before: float
    slow_downs: int


@dataclass(frozen=True)
class FetchRecord:
    """One request sent (the crawl's access log), with the host's state after it."""

    url: str
    host: str
    status: int | None
    meta: str
    error: str | None
    started: float
    duration: float
    state: HostState


@dataclass(frozen=True)
class DecisionRecord:
    """One policy decision about a URL."""

    url: str
    host: str
    allowed: bool
    reason: str
    at: float


@dataclass(frozen=True)
class FetchedPage:
    """A fetched URL to commit: its decision, its request, the page for the index (kept as
    ``role`` keeps pages) and its links to queue (url, depth, parent)."""

    decision: DecisionRecord
    fetch: FetchRecord
    page: Page
    role: str
    links: Iterable[tuple[str, int, str]]


@dataclass(frozen=True)
class CachedFile:
    """A policy file's last fetch: its RFC 9309 outcome, body and expiry."""

    host: str
    name: str  # "robots.txt", ...
    outcome: FetchOutcome
    status: int | None
    body: bytes | None
    fetched_at: float
    expires_at: float

    @classmethod
    def from_row(cls, host: str, name: str, row: Sequence[Any]) -> CachedFile:
        """The file from a robots table row of (outcome, reason, status, body, fetched_at,
        expires_at), as either store reads it (PostgreSQL's bytea comes back as memoryview)."""
        kind, reason, status, body, fetched_at, expires_at = row
        outcome = FetchOutcome(kind, reason, None, expires_at - fetched_at)
        body = None if body is None else bytes(body)
        return cls(host, name, outcome, status, body, fetched_at, expires_at)

    def row(self) -> tuple[str, str, float, float, str, str, int | None, bytes | None]:
        """The values of the robots table's columns (host, name, fetched_at, expires_at,
        outcome, reason, status, body), in that order, for either store."""
        return (
            self.host,
            self.name,
            self.fetched_at,
            self.expires_at,
            self.outcome.kind,
            self.outcome.reason,
            self.status,
            self.body,
        )


@dataclass(frozen=True)
class Lease:
    """A host leased to this crawl process. ``state``: the politeness state another
    process left it in, when the host changed hands (None: nothing to adopt)."""

    state: HostState | None


class CrawlStore(Protocol):
    """What the crawl loop needs of its storage; every method is one transaction."""

    # -- the run --
    def check_settings(self, settings: dict[str, str]) -> tuple[str, str, str] | None:
        """Record the settings, or return (key, stored, given) for the first that differs."""
        ...

    def recover(self) -> int: ...
    def host_states(self) -> dict[str, HostState]:
        """Every host's persisted politeness state; clears the skips of the last run."""
        ...

    def hosts_with_work(self) -> list[str]: ...
    def count_pages(self) -> int: ...
    def count_hosts(self) -> int: ...

    # -- hosts shared between crawl processes --
    def lease_host(self, host: str, lease: str) -> Lease | None:
        """Take or renew ``host`` for this process (before its first request and before
        every request); None when another process holds it."""
        ...

    def release_host(self, host: str, lease: str) -> None: ...
    def work_elsewhere(self, lease: str) -> dict[str, float]:
        """Hosts with work that another process holds, each with the seconds until it may
        be taken over (0: now)."""
        ...

    # -- the frontier --
    def seed(self, urls: list[str]) -> dict[str, str]: ...
    def claim(self, host: str, lease: str) -> Claim | None: ...
    def release(self, url: str) -> None: ...
    def queued(self) -> int: ...
    def leased(self) -> list[str]: ...
    def state_of(self, url: str) -> tuple[str, str | None] | None: ...

    # -- hosts and policy files --
    def skip_host(self, host: str, reason: str) -> None: ...
    def load_policy_file(self, host: str, name: str, now: float) -> CachedFile | None: ...
    def save_policy_file(self, file: CachedFile, fetch: FetchRecord) -> None:
        """Log the fetch that got a policy file and cache its outcome."""
        ...

    def log_fetch(self, fetch: FetchRecord) -> None: ...

    # -- certificate pins (trust on first use, per Gemini host and port) --
    def pin(self, host: str, port: int) -> str | None: ...
    def set_pin(self, host: str, port: int, fingerprint: str, now: float) -> None: ...

    # -- closing a claimed URL --
    def slowed_down(self, fetch: FetchRecord) -> None:
        """The URL's request was answered "slow down": log it, queue the URL again."""
        ...

    def refused(self, decision: DecisionRecord) -> None: ...
    def failed(self, decision: DecisionRecord, fetch: FetchRecord) -> None: ...
    def duplicate_of(self, content_hash: str, url: str) -> str | None: ...
    def fetched(self, fetched: FetchedPage) -> dict[str, int]:
        """Commit a page, its decision and fetch, and its links into the frontier;
        returns the hosts that got newly queued URLs, with how many."""
        ...


class SqliteStore(Frontier):
    """:class:`CrawlStore` on the crawl database (see :mod:`geminibot.index.db`)."""

    def __init__(
        self, conn: sqlite3.Connection, clock: Callable[[], float], limits: Limits | None = None
    ) -> None:
        super().__init__(conn, clock, limits)

    # -- the run --

    def check_settings(self, settings: dict[str, str]) -> tuple[str, str, str] | None:
        with transaction(self.conn):
            for key, value in settings.items():
                stored = get_setting(self.conn, key)
                if stored is None:
                    set_setting(self.conn, key, value)
                elif stored != value:
                    return key, stored, value
        return None

    def host_states(self) -> dict[str, HostState]:
        with transaction(self.conn):
            self.conn.execute("UPDATE hosts SET skipped_reason = NULL")
        rows = self.conn.execute(
            "SELECT host, last_fetch_at, coalesce(last_duration, 0), not_before, slow_downs"
            " FROM hosts"
        ).fetchall()
        return {str(row[0]): HostState(*row[1:]) for row in rows}

    # -- hosts: one process per SQLite database (a lock file), so every host is ours --

    def lease_host(self, host: str, lease: str) -> Lease | None:
        return Lease(None)

    def release_host(self, host: str, lease: str) -> None:
        pass

    def work_elsewhere(self, lease: str) -> dict[str, float]:
        return {}

    def count_pages(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM pages").fetchone()[0])

    def count_hosts(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM hosts").fetchone()[0])

    # -- hosts and policy files --

    def skip_host(self, host: str, reason: str) -> None:
        with transaction(self.conn):
            self.conn.execute("UPDATE hosts SET skipped_reason = ? WHERE host = ?", (reason, host))

    def load_policy_file(self, host: str, name: str, now: float) -> CachedFile | None:
        """The cached fetch of ``name`` on ``host`` if it is still fresh at ``now``."""
        row = self.conn.execute(
            "SELECT outcome, reason, status, body, fetched_at, expires_at FROM robots"
            " WHERE host = ? AND name = ?",
            (host, name),
        ).fetchone()
        if row is None or row[5] <= now:
            return None
        return CachedFile.from_row(host, name, row)

    def save_policy_file(self, file: CachedFile, fetch: FetchRecord) -> None:
        with transaction(self.conn):
            self._log_fetch(fetch)
            self.conn.execute(
                "INSERT INTO robots (host, name, fetched_at, expires_at, outcome, reason,"
                " status, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (host, name)"
                " DO UPDATE SET fetched_at = excluded.fetched_at,"
                " expires_at = excluded.expires_at, outcome = excluded.outcome,"
                " reason = excluded.reason, status = excluded.status, body = excluded.body",
                file.row(),
            )

    def log_fetch(self, fetch: FetchRecord) -> None:
        with transaction(self.conn):
            self._log_fetch(fetch)

    def pin(self, host: str, port: int) -> str | None:
        row = self.conn.execute(
            "SELECT fingerprint FROM pins WHERE host = ? AND port = ?", (host, port)
        ).fetchone()
        return None if row is None else str(row[0])

    def set_pin(self, host: str, port: int, fingerprint: str, now: float) -> None:
        with transaction(self.conn):
            self.conn.execute(
                "INSERT INTO pins (host, port, fingerprint, first_seen) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (host, port) DO UPDATE SET fingerprint = excluded.fingerprint,"
                " first_seen = excluded.first_seen",
                (host, port, fingerprint, now),
            )

    def _log_fetch(self, f: FetchRecord) -> None:
        self.conn.execute(
            "INSERT INTO fetches (url, host, status, meta, error, started_at, duration)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (f.url, f.host, f.status, f.meta, f.error, f.started, f.duration),
        )
        s = f.state
        self.conn.execute(
            "UPDATE hosts SET last_fetch_at = ?, last_duration = ?, not_before = ?,"
            " slow_downs = ? WHERE host = ?",
            (s.last_end, s.last_duration, s.not_before, s.slow_downs, f.host),
        )

    def _record_decision(self, d: DecisionRecord) -> None:
        self.conn.execute(
            "INSERT INTO decisions (url, host, allowed, reason, at) VALUES (?, ?, ?, ?, ?)",
            (d.url, d.host, int(d.allowed), d.reason, d.at),
        )

    # -- the frontier --

    def release(self, url: str) -> None:
        with transaction(self.conn):
            super().release(url)

    # -- closing a claimed URL --

    def slowed_down(self, fetch: FetchRecord) -> None:
        with transaction(self.conn):
            self._log_fetch(fetch)
            super().release(fetch.url)

    def refused(self, decision: DecisionRecord) -> None:
        with transaction(self.conn):
            self._record_decision(decision)
            self.finish(decision.url, "refused", decision.reason)

    def failed(self, decision: DecisionRecord, fetch: FetchRecord) -> None:
        with transaction(self.conn):
            self._record_decision(decision)
            self._log_fetch(fetch)
            self.finish(decision.url, "failed", fetch.error)

    def duplicate_of(self, content_hash: str, url: str) -> str | None:
        return find_by_hash(self.conn, content_hash, url)

    def fetched(self, fetched: FetchedPage) -> dict[str, int]:
        woken: dict[str, int] = {}
        with transaction(self.conn):
            self._record_decision(fetched.decision)
            self._log_fetch(fetched.fetch)
            for link, depth, parent in fetched.links:
                if self.add(link, depth, parent) == "queued":
                    host = host_key(link)
                    woken[host] = woken.get(host, 0) + 1
            store_page(self.conn, fetched.page, fetched.role)
            self.finish(fetched.decision.url, "done")
        return woken


class StoreKnownHosts:
    """The crawl store's certificate pins as the Gemini client's known-hosts store
    (:class:`geminibot.gemini.tofu.KnownHosts`): pins last as long as the crawl."""

    def __init__(self, store: CrawlStore, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock

    def get(self, host: str, port: int) -> str | None:
        return self.store.pin(host, port)

    def put(self, host: str, port: int, fingerprint: str) -> None:
        self.store.set_pin(host, port, fingerprint, self.clock())


def cache_expiry(now: float, outcome: FetchOutcome) -> float:
    """When a policy file fetched at ``now`` with ``outcome`` must be fetched again."""
    return now + min(outcome.cache_seconds, MAX_CACHE_SECONDS)
