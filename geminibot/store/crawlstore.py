"""Everything a crawl keeps: one interface (:class:`CrawlStore`), and SQLite's strategy.

The crawl loop, its scheduler and its adapters hold no SQL: they call the methods below,
each one transaction (on SQLite, the crawl loop's are batched: several committed as one,
see :class:`SqliteEngine`): a page, its links and the new frontier rows are committed
together or not at all; so are a refusal and its decision. One class implements them
for both engines (:class:`~geminibot.store.sqlstore.SqlStore`), over :class:`SqliteEngine`
here or :class:`~geminibot.store.pgstore.PgEngine`. The records they keep and hand back
are :mod:`geminibot.store.records`'.

Times are wall-clock seconds from the injected clock.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Protocol

from geminibot.policy import FetchOutcome
from geminibot.policy.outcomes import MAX_CACHE_SECONDS
from geminibot.store import statements as q
from geminibot.store.db import begin_write, get_setting, set_setting
from geminibot.store.freshness import Visit
from geminibot.store.frontier import Claim
from geminibot.store.records import (
    CachedFile,
    DecisionRecord,
    FetchedPage,
    FetchRecord,
    HostState,
    Lease,
    Revisit,
    TLSRecord,
)
from geminibot.store.sqlite_sql import ENGINE
from geminibot.store.sqlstore import SqlStore
from geminibot.store.traps import FrontierLimits

__all__ = [
    "CachedFile",
    "CrawlStore",
    "DecisionRecord",
    "FetchRecord",
    "FetchedPage",
    "HostState",
    "Lease",
    "Revisit",
    "SqliteStore",
    "StoreKnownHosts",
    "TLSRecord",
    "cache_expiry",
]

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
        renews the lease if so, and counts the claim's attempt at its first request
        (:mod:`geminibot.store.frontier`). False: another process took the host over
        meanwhile (the lease ran out during the wait), and the request must not be sent."""
        ...

    def release_host(self, host: str, lease: str) -> None: ...
    def work_elsewhere(self, lease: str) -> dict[str, float]:
        """Hosts with work that another process holds, each with the seconds until it may
        be taken over (0: now)."""
        ...

    # -- the frontier --
    def seed(self, urls: list[str]) -> dict[str, str]: ...
    def claim(self, host: str, lease: str) -> Claim | None: ...
    def release(self, url: str) -> None:
        """Give a leased URL back to the queue: unsent, its attempts as before the
        claim; sent, without the attempt its request counted."""
        ...

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
    def saw_tls(self, record: TLSRecord) -> None:
        """Keep a host's TLS version, cipher and certificate facts as history."""
        ...

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
        not, but those gone; trapped ones never); returns how many."""
        ...

    def revisit_due(self, now: float) -> dict[str, int]:
        """Queue the finished URLs due at ``now``; the hosts that got queued URLs, with
        how many."""
        ...

    def newest_url(self) -> int:
        """The highest URL id (0: none): a mark for :meth:`queued_since`."""
        ...

    def queued_since(self, newest: int) -> dict[str, int]:
        """The hosts of the URLs queued with an id above the mark ``newest`` (new to the
        store since: a ``/submit``, another process's links), how many each."""
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


class SqliteEngine:
    """The SQLite strategy of :class:`~geminibot.store.sqlstore.SqlStore`: one process per
    database (a lock file), so every host is ours and there are no leases; the crawl
    loop's writes batched (``batch=True``): committed every :data:`BATCH_URLS` closed URLs
    or :data:`BATCH_SECONDS`, by any other write and by :meth:`end_run`; a failed write
    rolls its batch back. A ``kill -9`` repeats at most the open batch, and the run after
    a run that did not end commits each write (careful mode), so that a page that kills
    the process is given up after :data:`~geminibot.store.frontier.MAX_URL_ATTEMPTS`
    kills (``tests/store/test_store_batch.py``, ``tests/store/test_store_attempts.py``)."""

    dialect = ENGINE
    orphaned = "true"  # (every leased URL: the process that leased it is gone)
    exclusive = True

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        batch: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
        cache_kib: int = CACHE_KIB,
    ) -> None:
        conn.execute(f"PRAGMA cache_size = -{int(cache_kib)}")
        conn.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}")
        self.conn = conn
        self.batch = batch
        self._monotonic = monotonic
        self._opened = 0.0  # when the open batch's first write began (monotonic)
        self._closed = 0  # URLs closed in the open batch
        self._lost = False  # a failed write rolled a batch back in this run
        #: Commit each write when it ends (until :meth:`recovering` finds the run before
        #: ended).
        self.careful = True

    def array(self, values: list[str]) -> str:
        return json.dumps(values)

    @contextmanager
    def writing(self, closes: bool = False) -> Iterator[sqlite3.Connection]:
        """One write of the hot path, into the open batch (opened if none is);
        ``closes``: it closes a claimed URL (counts towards :data:`BATCH_URLS`)."""
        conn = self.conn
        if not conn.in_transaction:
            begin_write(conn)
            self._opened = self._monotonic()
        try:
            yield conn
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
    def committing(self) -> Iterator[sqlite3.Connection]:
        """A write committed when it ends, with the batch that waits."""
        with self.writing():
            yield self.conn
        self.flush()

    def reading(self) -> AbstractContextManager[sqlite3.Connection]:
        return nullcontext(self.conn)

    def _flush_if_old(self) -> None:
        if self.conn.in_transaction and self._monotonic() - self._opened >= BATCH_SECONDS:
            self.flush()

    def end_run(self) -> None:
        self.flush()
        if self.batch and not self._lost:
            with self.committing():
                set_setting(self.conn, RUN_OPEN, "0")

    def recovering(self, conn: sqlite3.Connection) -> None:
        """Careful mode when the run before did not end (or left claims)."""
        ended = get_setting(conn, RUN_OPEN) != "1"
        left = conn.execute(self.dialect.sql[q.LEASED]).fetchone()
        self.careful = not ended or left is not None
        if self.batch:
            set_setting(conn, RUN_OPEN, "1")

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

    def close(self) -> None:
        """(The connection is the caller's.)"""

    # -- hosts: every host is this process's --

    def lease_host(self, host: str, lease: str, now: float) -> Lease:
        return Lease(None)

    @contextmanager
    def holding(
        self, host: str, lease: str, claimed: str | None, first: bool
    ) -> Iterator[tuple[bool, sqlite3.Connection | None]]:
        """Always held. A claim's first request counts its attempt, a write into the open
        batch: on disk before the request is sent when each write is committed (careful
        mode, or ``batch=False``); otherwise with the batch's commit: a kill before it
        loses the count (and the claim too, unless a commit came between them), so the
        URL is queued again uncounted and the next run, careful, commits each count
        before its request."""
        if not first:
            self._flush_if_old()
            yield True, None
            return
        with self.writing() as conn:
            yield True, conn

    def claiming(self, host: str, lease: str) -> AbstractContextManager[sqlite3.Connection]:
        return self.writing()

    def release_host(self, host: str, lease: str) -> None:
        pass

    def work_elsewhere(self, lease: str) -> dict[str, float]:
        return {}


class SqliteStore(SqlStore):
    """:class:`CrawlStore` on an SQLite crawl database (:class:`SqliteEngine`)."""

    engine: SqliteEngine

    def __init__(
        self,
        conn: sqlite3.Connection,
        clock: Callable[[], float],
        limits: FrontierLimits | None = None,
        *,
        batch: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
        cache_kib: int = CACHE_KIB,
    ) -> None:
        engine = SqliteEngine(conn, batch=batch, monotonic=monotonic, cache_kib=cache_kib)
        super().__init__(engine, clock, limits)
        self.conn = conn

    def flush(self) -> None:
        """Commit the open batch (:meth:`SqliteEngine.flush`)."""
        self.engine.flush()


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
