"""Everything a crawl keeps: one interface (:class:`CrawlStore`), one SQLite implementation.

The crawl loop, its scheduler and its adapters hold no SQL: they call the methods below,
each one transaction (on SQLite, the crawl loop's are batched: several committed as one,
see :class:`SqliteStore`): a page, its links and the new frontier rows are committed
together or not at all; so are a refusal and its decision. Another engine (PostgreSQL)
implements the same :class:`CrawlStore`; :class:`SqliteStore` is the SQLite one, on the
schema of :mod:`geminibot.index.db` (an existing crawl database resumes unchanged).

Times are wall-clock seconds from the injected clock.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from geminibot.crawl.freshness import VANISHED_AFTER, VANISHED_FAILURES, Visit
from geminibot.crawl.frontier import Claim, Frontier, Limits
from geminibot.crawl.schemes import host_key
from geminibot.index import Page, store_page
from geminibot.index.db import get_setting, set_setting
from geminibot.index.pages import find_by_hash
from geminibot.policy import FetchOutcome
from geminibot.policy.outcomes import MAX_CACHE_SECONDS

#: URLs closed (fetched, refused, failed, slowed down, released) in one SQLite batch before
#: it is committed (:class:`SqliteStore`): what a ``kill -9`` makes the crawl fetch again.
BATCH_URLS = 100
#: Seconds a SQLite batch may stay open (from its first write) before it is committed,
#: checked at each write and before each request: how long another process reading the
#: database may wait to see a page, and the span of work a ``kill -9`` repeats.
BATCH_SECONDS = 2.0
#: The crawl connection's SQLite page cache (KiB; SQLite's default is 2,000). Each link a
#: page brings is looked up and, if new, inserted into the frontier's indexes at a random
#: place; a batch of 100 pages touches thousands of their pages, and with 2 MB each was
#: read again from the file (a ``pread`` each) and dirty ones spilled before the commit.
#: A bound: memory stays flat in the frontier's size (docs/benchmarks.md).
CACHE_KIB = 65_536
#: The crawl connection's WAL checkpoint threshold (pages; SQLite's default is 1,000). A
#: batch writes more pages than that to the WAL, so each commit was followed by a
#: checkpoint copying them all into the database; a page written by several batches (the
#: FTS5 index's structure, the b-trees' upper levels, ``hosts``) is now copied once per
#: checkpoint. The WAL grows to about this many pages (4 KiB each) before it starts over.
CHECKPOINT_PAGES = 8_192
#: The setting that says a batched run is open ("1") or ended ("0"): found open, the run
#: before was killed (see :class:`SqliteStore`, careful mode).
RUN_OPEN = "run_open"


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

    #: The host's row after the request, ``{0}`` standing for the engine's placeholder:
    #: its politeness state and its unanswered requests in a row (vanished hosts, see
    #: :mod:`geminibot.crawl.freshness`); parameters: :meth:`host_row`.
    HOST_UPDATE = (
        "UPDATE hosts SET last_fetch_at = {0}, last_duration = {0}, not_before = {0},"
        " slow_downs = {0}, failures = CASE WHEN {0} THEN failures + 1 ELSE 0 END,"
        " failing_since = CASE WHEN {0} THEN coalesce(failing_since, {0}) END WHERE host = {0}"
    )

    def host_row(self) -> tuple[float | None, float, float, int, bool, bool, float, str]:
        """The parameters of :data:`HOST_UPDATE`, for either store."""
        s, failed = self.state, self.status is None
        return (
            s.last_end,
            s.last_duration,
            s.not_before,
            s.slow_downs,
            failed,
            failed,
            self.started,
            self.host,
        )


#: The pages still in the search index (text, or a hash to be found by) of the hosts
#: vanished at a time (:mod:`geminibot.crawl.freshness`): id and URL; ``{0}`` stands for
#: the engine's placeholder; parameters: :func:`vanished_since`.
VANISHED_PAGES = (
    "SELECT id, url FROM pages WHERE (text_indexed OR content_hash IS NOT NULL) AND host IN"
    " (SELECT host FROM hosts h WHERE failures >= {0} AND failing_since <= {0} AND EXISTS"
    " (SELECT 1 FROM hosts o WHERE o.failures = 0 AND o.last_fetch_at > h.failing_since))"
    " ORDER BY id"
)


def vanished_since(now: float) -> tuple[int, float]:
    """The parameters of :data:`VANISHED_PAGES` at ``now``."""
    return VANISHED_FAILURES, now - VANISHED_AFTER


@dataclass(frozen=True)
class DecisionRecord:
    """One policy decision about a URL."""

    url: str
    host: str
    allowed: bool
    reason: str
    at: float


@dataclass(frozen=True)
class Revisit:
    """When a finished URL is due again (None: never) and its learned revisit interval
    (see :mod:`geminibot.crawl.freshness`). Its failed requests in a row are the
    frontier's ``attempts`` (see :mod:`geminibot.crawl.frontier`)."""

    next_visit: float | None
    interval: float | None = None


@dataclass(frozen=True)
class FetchedPage:
    """A fetched URL to commit: its decision, its request, the page for the index (kept as
    ``role`` keeps pages) and its links to queue (url, depth, parent).

    ``unchanged``: the same status and body as last time: only its fetch time is updated
    (nothing re-indexed, no links queued). ``gone``: it answered 51/52: out of the index
    and of the host's live URLs. ``demote``: the canonical URL of the page's body until
    now, which becomes an alias of this page (see ``canonical_key``)."""

    decision: DecisionRecord
    fetch: FetchRecord
    page: Page
    role: str
    links: Iterable[tuple[str, int, str]]
    revisit: Revisit | None = None
    unchanged: bool = False
    gone: bool = False
    demote: str | None = None


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

    #: The query of a host's cached file, ``{0}`` standing for the engine's placeholder.
    QUERY = (
        "SELECT outcome, reason, status, body, fetched_at, expires_at FROM robots"
        " WHERE host = {0} AND name = {0}"
    )

    @classmethod
    def fresh(
        cls, host: str, name: str, row: Sequence[Any] | None, now: float
    ) -> CachedFile | None:
        """The file from the row :data:`QUERY` read (outcome, reason, status, body, fetched_at,
        expires_at), as either store reads it (PostgreSQL's bytea comes back as memoryview),
        if there is one and it is still fresh at ``now``."""
        if row is None or row[5] <= now:
            return None
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


class LostHost(Exception):
    """Another crawl process took the host over while this one waited for its turn
    (:meth:`CrawlStore.hold_host` said no): the request is not sent, the worker ends."""


class CrawlStore(Protocol):
    """What the crawl loop needs of its storage; every method is one transaction."""

    # -- the run --
    def check_settings(self, settings: dict[str, str]) -> tuple[str, str, str] | None:
        """Record the settings, or return (key, stored, given) for the first that differs."""
        ...

    def record_run(self, key: str, value: str) -> None:
        """Record what this run was told (a setting replaced by each run, unlike those
        :meth:`check_settings` holds to): see :mod:`geminibot.crawl.runrecord`."""
        ...

    def recover(self) -> int: ...
    def host_states(self) -> dict[str, HostState]:
        """Every host's persisted politeness state; clears the skips of the last run."""
        ...

    def hosts_with_work(self) -> dict[str, int]:
        """Hosts with queued URLs, oldest work first, with how many each."""
        ...

    def count_pages(self) -> int: ...
    def count_hosts(self) -> int: ...

    # -- hosts shared between crawl processes --
    def lease_host(self, host: str, lease: str) -> Lease | None:
        """Take or renew ``host`` for this process (before a worker's first request);
        None when another process holds it."""
        ...

    def hold_host(self, host: str, lease: str, claimed: str | None) -> bool:
        """Right before a request to ``host`` (after every wait): whether the host is still
        this process's and ``claimed`` (the URL claimed for it, if any) still its claim;
        renews the lease if so. False: another process took the host over meanwhile (the
        lease ran out during the wait), and the request must not be sent."""
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

    def refused(self, decision: DecisionRecord, revisit: Revisit | None = None) -> None: ...
    def failed(
        self, decision: DecisionRecord, fetch: FetchRecord, revisit: Revisit | None = None
    ) -> None: ...
    def duplicate_of(self, content_hash: str, url: str) -> str | None: ...
    def fetched(self, fetched: FetchedPage) -> dict[str, int]:
        """Commit a page, its decision and fetch, and its links into the frontier;
        returns the hosts that got newly queued URLs, with how many."""
        ...

    # -- freshness --
    def previous(self, url: str) -> Visit | None:
        """What the last visit of ``url`` left (None: never visited)."""
        ...

    def revisit(self, now: float, everything: bool = False) -> int:
        """Queue the finished URLs due at ``now`` (``everything``: all of them, due or
        not; ``gone`` and trapped ones never); returns how many."""
        ...

    def prune_logs(self, before: float) -> int:
        """Delete the fetch and decision log rows older than ``before``; returns how many."""
        ...

    def aliases(self, url: str) -> list[str]:
        """The URLs recorded as aliases of the canonical ``url`` (same body)."""
        ...

    def end_run(self) -> None:
        """The crawl loop's run ended (normally, stopped, or by an exception): commit what
        the store holds back (SQLite's batch; PostgreSQL commits each call)."""
        ...

    def delist_vanished(self, now: float) -> int:
        """Take the pages of the hosts vanished at ``now`` out of the search index (text,
        title, links, hash) and queue their aliases again; returns how many pages."""
        ...


class SqliteStore(Frontier):
    """:class:`CrawlStore` on the crawl database (see :mod:`geminibot.index.db`).

    Batched commits (``batch=True``, as the crawl loop opens it; otherwise each write is
    committed when it ends): the writes of the crawl loop's hot path (a claim, a URL closed
    as fetched, refused, failed or slowed down, a fetch logged, a policy file cached) go
    into one open write transaction, committed when it holds :data:`BATCH_URLS` closed
    URLs, when its first write is :data:`BATCH_SECONDS` old (checked at each write and
    before each request), by every other write (settings, seeds, recovery, revisits,
    skips, pins: committed at once, with what waits) and by :meth:`end_run` (the crawl
    loop calls it when its run ends, however it ends, an exception included). A write
    that fails rolls the open batch back with it (as a kill would: see below) and leaves
    the run marked open, so the next one is careful. Each commit writes the
    b-tree pages its rows touched once, and FTS5 flushes its pending terms into one
    segment for the whole batch, instead of once per page (docs/benchmarks.md).

    What a ``kill -9`` (or a power cut) repeats: the last batch (at most
    :data:`BATCH_URLS` URLs, of at most :data:`BATCH_SECONDS`): its pages are fetched
    again, its claims went back with it (``queued``, not ``leased``); nothing committed is
    lost and the index never holds half a page. Another process reading the database
    (``geminibot search`` during a crawl) sees a page at most :data:`BATCH_SECONDS` after
    its fetch, and waits up to that long for the write lock.

    Careful mode: a claim whose attempt is not committed does not count towards
    :data:`~geminibot.crawl.frontier.MAX_URL_ATTEMPTS`, so a page that kills the process
    outright (not an exception: those end the run, which commits) would be fetched again
    by every resume. So a run that finds the one before it did not end (:data:`RUN_OPEN`
    still "1", or URLs left ``leased`` by an older geminibot) commits each write when it
    ends, as an unbatched store does (a claim before its request is sent): after
    MAX_URL_ATTEMPTS such kills the URL is given up, and a kill repeats only the requests
    on the wire. A run that ends clears the mark, and the next run batches again.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        clock: Callable[[], float],
        limits: Limits | None = None,
        *,
        batch: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
        cache_kib: int = CACHE_KIB,
    ) -> None:
        super().__init__(conn, clock, limits)
        conn.execute(f"PRAGMA cache_size = -{int(cache_kib)}")
        conn.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}")
        self.batch = batch
        self._monotonic = monotonic
        self._opened = 0.0  # when the open batch's first write began (monotonic)
        self._closed = 0  # URLs closed in the open batch
        self._lost = False  # a failed write rolled a batch back in this run
        #: Commit each write when it ends (until :meth:`recover` finds the run before
        #: ended).
        self.careful = True

    # -- the batch --

    @contextmanager
    def _batched(self, closes: bool = False) -> Iterator[None]:
        """One write of the hot path, into the open batch (opened if none is);
        ``closes``: it closes a claimed URL (counts towards :data:`BATCH_URLS`)."""
        conn = self.conn
        if not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")
            self._opened = self._monotonic()
        try:
            yield
        except BaseException:
            # The batch goes back whole (a savepoint per write would make FTS5 flush its
            # pending terms at each one); the run that raised is not marked ended.
            self._roll_back()
            raise
        self._closed += closes
        if not self.batch or self.careful or self._closed >= BATCH_URLS:
            self.flush()
        else:
            self._flush_if_old()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A write committed when it ends, with the batch that waits."""
        with self._batched():
            yield self.conn
        self.flush()

    def _flush_if_old(self) -> None:
        if self.conn.in_transaction and self._monotonic() - self._opened >= BATCH_SECONDS:
            self.flush()

    def end_run(self) -> None:
        self.flush()
        if self.batch and not self._lost:
            with self._tx():
                set_setting(self.conn, RUN_OPEN, "0")

    def recover(self) -> int:
        with self._tx():
            ended = get_setting(self.conn, RUN_OPEN) != "1"
            left = self.conn.execute("SELECT 1 FROM urls WHERE state = 'leased' LIMIT 1")
            self.careful = not ended or left.fetchone() is not None
            if self.batch:
                set_setting(self.conn, RUN_OPEN, "1")
            return self._recover()

    def flush(self) -> None:
        """Commit the open batch, if there is one (one that cannot be committed, a full
        disk say, is rolled back, as a failed write's is)."""
        if self.conn.in_transaction:
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                self._roll_back()
                raise
        self._closed = 0

    def _roll_back(self) -> None:
        if self.conn.in_transaction:  # (SQLite may have rolled it back already)
            self.conn.execute("ROLLBACK")
        self._lost = True
        self._closed = 0

    # -- the run --

    def check_settings(self, settings: dict[str, str]) -> tuple[str, str, str] | None:
        with self._tx():
            for key, value in settings.items():
                stored = get_setting(self.conn, key)
                if stored is None:
                    set_setting(self.conn, key, value)
                elif stored != value:
                    return key, stored, value
        return None

    def record_run(self, key: str, value: str) -> None:
        with self._tx():
            set_setting(self.conn, key, value)

    def host_states(self) -> dict[str, HostState]:
        with self._tx():
            self.conn.execute("UPDATE hosts SET skipped_reason = NULL")
        rows = self.conn.execute(
            "SELECT host, last_fetch_at, coalesce(last_duration, 0), not_before, slow_downs"
            " FROM hosts"
        ).fetchall()
        return {str(row[0]): HostState(*row[1:]) for row in rows}

    # -- hosts: one process per SQLite database (a lock file), so every host is ours --

    def lease_host(self, host: str, lease: str) -> Lease | None:
        return Lease(None)

    def hold_host(self, host: str, lease: str, claimed: str | None) -> bool:
        self._flush_if_old()
        return True

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
        with self._tx():
            self.conn.execute("UPDATE hosts SET skipped_reason = ? WHERE host = ?", (reason, host))

    def load_policy_file(self, host: str, name: str, now: float) -> CachedFile | None:
        """The cached fetch of ``name`` on ``host`` if it is still fresh at ``now``."""
        row = self.conn.execute(CachedFile.QUERY.format("?"), (host, name)).fetchone()
        return CachedFile.fresh(host, name, row, now)

    def save_policy_file(self, file: CachedFile, fetch: FetchRecord) -> None:
        with self._batched():
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
        with self._batched():
            self._log_fetch(fetch)

    def pin(self, host: str, port: int) -> str | None:
        row = self.conn.execute(
            "SELECT fingerprint FROM pins WHERE host = ? AND port = ?", (host, port)
        ).fetchone()
        return None if row is None else str(row[0])

    def set_pin(self, host: str, port: int, fingerprint: str, now: float) -> None:
        with self._tx():
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
        self.conn.execute(FetchRecord.HOST_UPDATE.format("?"), f.host_row())

    def _record_decision(self, d: DecisionRecord) -> None:
        self.conn.execute(
            "INSERT INTO decisions (url, host, allowed, reason, at) VALUES (?, ?, ?, ?, ?)",
            (d.url, d.host, int(d.allowed), d.reason, d.at),
        )

    # -- the frontier --

    def claim(self, host: str, lease: str) -> Claim | None:
        with self._batched():
            return self._claim(host, lease)

    def release(self, url: str) -> None:
        with self._batched(closes=True):
            super().release(url)

    # -- closing a claimed URL --

    def slowed_down(self, fetch: FetchRecord) -> None:
        with self._batched(closes=True):
            self._log_fetch(fetch)
            super().release(fetch.url)

    def refused(self, decision: DecisionRecord, revisit: Revisit | None = None) -> None:
        with self._batched(closes=True):
            self._record_decision(decision)
            self.finish(decision.url, "refused", decision.reason)
            self._schedule(decision.url, revisit)

    def failed(
        self, decision: DecisionRecord, fetch: FetchRecord, revisit: Revisit | None = None
    ) -> None:
        with self._batched(closes=True):
            self._record_decision(decision)
            self._log_fetch(fetch)
            self.finish(decision.url, "failed", fetch.error)
            self._schedule(decision.url, revisit)

    def duplicate_of(self, content_hash: str, url: str) -> str | None:
        return find_by_hash(self.conn, content_hash, url)

    def fetched(self, fetched: FetchedPage) -> dict[str, int]:
        woken: Counter[str] = Counter()
        page, url = fetched.page, fetched.decision.url
        with self._batched(closes=True):
            self._record_decision(fetched.decision)
            self._log_fetch(fetched.fetch)
            if fetched.unchanged:
                self.conn.execute(
                    "UPDATE pages SET fetched_at = ?, meta = ? WHERE url = ?",
                    (page.fetched_at, page.meta, page.url),
                )
                self.finish(url, "done")
            else:
                old = self.conn.execute(
                    "SELECT content_hash, duplicate_of FROM pages WHERE url = ?", (page.url,)
                ).fetchone()
                if not fetched.gone:
                    for link, depth, parent in fetched.links:
                        added, host = self._add(link, depth, parent)
                        if added == "queued":
                            woken[host] += 1
                store_page(self.conn, page, fetched.role)
                if (
                    old is not None
                    and old[1] is None
                    and (fetched.gone or old[0] != page.content_hash)
                ):
                    woken.update(self._requeue_aliases(page.url))  # their canonical changed
                if fetched.demote is not None:
                    self._demote(fetched.demote, page.url)
                if fetched.gone:
                    self.finish(url, "gone", f"status {page.status}")
                    self.conn.execute(
                        "UPDATE hosts SET urls_total = max(0, urls_total - 1) WHERE host = ?",
                        (host_key(url),),
                    )
                else:
                    self.finish(url, "done")
            self._schedule(url, fetched.revisit)
        return dict(woken)

    def _schedule(self, url: str, revisit: Revisit | None) -> None:
        if revisit is not None:
            self.conn.execute(
                "UPDATE urls SET next_visit = ?, revisit_interval = ? WHERE url = ?",
                (revisit.next_visit, revisit.interval, url),
            )

    def _requeue_aliases(self, url: str) -> list[str]:
        """Queue the aliases of ``url`` again now (their body is no longer its body);
        returns their hosts, one per URL."""
        rows = self.conn.execute(
            "UPDATE urls SET state = 'queued', lease = NULL, next_visit = NULL"
            " WHERE state IN ('done', 'refused', 'failed')"
            " AND url IN (SELECT url FROM pages WHERE duplicate_of = ?) RETURNING host",
            (url,),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def _demote(self, old: str, new: str) -> None:
        """``old`` (and its aliases) become aliases of ``new``; ``old`` leaves the index."""
        self.conn.execute("UPDATE pages SET duplicate_of = ? WHERE duplicate_of = ?", (new, old))
        row = self.conn.execute("SELECT id FROM pages WHERE url = ?", (old,)).fetchone()
        if row is not None:
            self.conn.execute("DELETE FROM pages_fts WHERE rowid = ?", (row[0],))
            self.conn.execute("DELETE FROM links WHERE page_id = ?", (row[0],))
            self.conn.execute(
                "UPDATE pages SET duplicate_of = ?, title = '', text_indexed = 0 WHERE id = ?",
                (new, row[0]),
            )

    # -- freshness --

    def previous(self, url: str) -> Visit | None:
        row = self.conn.execute(
            "SELECT p.status, p.content_hash, p.duplicate_of, u.revisit_interval, u.attempts"
            " FROM urls u LEFT JOIN pages p ON p.url = u.url WHERE u.url = ?",
            (url,),
        ).fetchone()
        return None if row is None else Visit(*row)

    def revisit(self, now: float, everything: bool = False) -> int:
        due = "" if everything else " AND next_visit <= ?"
        with self._tx():
            cur = self.conn.execute(
                "UPDATE urls SET state = 'queued', lease = NULL"
                f" WHERE state IN ('done', 'refused', 'failed'){due}",
                () if everything else (now,),
            )
            return cur.rowcount

    def prune_logs(self, before: float) -> int:
        with self._tx():
            n = self.conn.execute("DELETE FROM fetches WHERE started_at < ?", (before,)).rowcount
            n += self.conn.execute("DELETE FROM decisions WHERE at < ?", (before,)).rowcount
        return n

    def aliases(self, url: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT url FROM pages WHERE duplicate_of = ? ORDER BY url", (url,)
        ).fetchall()
        return [str(r[0]) for r in rows]

    def delist_vanished(self, now: float) -> int:
        with self._tx():
            rows = self.conn.execute(VANISHED_PAGES.format("?"), vanished_since(now)).fetchall()
            ids = [(r[0],) for r in rows]
            self.conn.executemany("DELETE FROM pages_fts WHERE rowid = ?", ids)
            self.conn.executemany("DELETE FROM links WHERE page_id = ?", ids)
            self.conn.executemany(
                "UPDATE pages SET title = '', text_indexed = 0, content_hash = NULL WHERE id = ?",
                ids,
            )
            for _, url in rows:
                self._requeue_aliases(str(url))
        return len(rows)


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
