"""The crawl store, written once for both engines (:class:`SqlStore`), over an engine
strategy (:class:`EngineStrategy`) that gives only what truly differs: the transaction
policy (SQLite batches the crawl loop's writes, PostgreSQL takes a pooled connection per
call), the host leases of several crawl processes (PostgreSQL), and the statements of its
dialect (:mod:`geminibot.store.statements`). URL admission is the
:class:`~geminibot.store.frontier.Frontier`'s, in batches on both engines; the reads of the
frontier's state are :class:`FrontierReads`'.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from geminibot.store import records
from geminibot.store import statements as q
from geminibot.store.feedstore import visit_feed
from geminibot.store.freshness import VANISHED_AFTER, VANISHED_FAILURES, Visit
from geminibot.store.frontier import Claim, Frontier, give_up_params
from geminibot.store.pages import write_page
from geminibot.store.records import CachedFile, FetchedPage, FetchRecord, HostState, Lease, Revisit
from geminibot.store.records import DecisionRecord as Decision
from geminibot.store.statements import Engine, Rows, Statement
from geminibot.store.traps import FrontierLimits
from geminibot.urls import normalise


class EngineStrategy(Protocol):
    """What differs between the engines under :class:`SqlStore`."""

    #: The engine's compiled statements and its own few.
    dialect: Engine
    #: Recovery's scope: the leased URLs whose holder is gone (a condition on ``urls u``).
    orphaned: str
    #: Whether one process writes the database (no row locks needed).
    exclusive: bool

    def array(self, values: list[str]) -> object:
        """A list as the engine's list parameter (:class:`~geminibot.store.statements.Given`)."""
        ...

    def reading(self) -> AbstractContextManager[Any]:
        """A connection to read from."""
        ...

    def writing(self, closes: bool = False) -> AbstractContextManager[Any]:
        """A write of the crawl loop's hot path (``closes``: it closes a claimed URL)."""
        ...

    def committing(self) -> AbstractContextManager[Any]:
        """A write committed when it ends."""
        ...

    def recovering(self, conn: Any) -> None:
        """Recovery is starting, in ``conn``'s transaction."""
        ...

    def end_run(self) -> None: ...
    def close(self) -> None: ...

    def lease_host(self, host: str, lease: str, now: float) -> Lease | None:
        """Take or renew ``host`` (None: another process holds it); taken over from
        another holder at ``now``, the claims it left are given up or queued again."""
        ...

    def holding(
        self, host: str, lease: str, claimed: str | None, first: bool
    ) -> AbstractContextManager[tuple[bool, Any]]:
        """Whether ``host`` and ``claimed`` are still this process's right before a
        request (the lease renewed), with a connection to count ``claimed``'s first
        attempt in (``first``), else None."""
        ...

    def claiming(self, host: str, lease: str) -> AbstractContextManager[Any]:
        """A transaction to claim a URL of ``host`` in; None: the host is not ours."""
        ...

    def release_host(self, host: str, lease: str) -> None: ...
    def work_elsewhere(self, lease: str) -> dict[str, float]: ...


class FrontierReads:
    """What the crawl reads of its frontier without writing, each one read over an engine
    strategy: the hosts with work, counts, a URL's state, the URLs new since a mark."""

    def __init__(self, engine: EngineStrategy) -> None:
        self.engine = engine
        self._sql = engine.dialect.sql
        self._reading = engine.reading

    def _run(
        self, conn: Any, statement: Statement | Rows, params: dict[str, Any] | tuple[Any, ...] = ()
    ) -> Any:
        """Run ``statement`` on ``conn`` (``params``: a :class:`Rows`' as a tuple); its
        cursor."""
        return conn.execute(self._sql[statement], params)

    def hosts_with_work(self) -> dict[str, int]:
        with self._reading() as conn:
            rows = self._run(conn, q.HOSTS_WITH_WORK).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    def newest_url(self) -> int:
        """The highest URL id (0: none): a mark for :meth:`queued_since`."""
        return self._count(q.NEWEST_URL)

    def queued_since(self, newest: int) -> dict[str, int]:
        """The hosts of the URLs queued with an id above the mark ``newest`` (new to the
        store since: a ``/submit``, another process's links), how many each."""
        with self._reading() as conn:
            rows = self._run(conn, q.QUEUED_SINCE, {"newest": newest}).fetchall()
        return {str(host): int(n) for host, n in rows}

    def count_pages(self) -> int:
        return self._count(q.COUNT_PAGES)

    def count_hosts(self) -> int:
        return self._count(q.COUNT_HOSTS)

    def queued(self) -> int:
        return self._count(q.COUNT_QUEUED)

    def _count(self, statement: Statement) -> int:
        with self._reading() as conn:
            row = self._run(conn, statement).fetchone()
        return 0 if row is None or row[0] is None else int(row[0])

    def leased(self) -> list[str]:
        with self._reading() as conn:
            return [str(r[0]) for r in self._run(conn, q.LEASED).fetchall()]

    def state_of(self, url: str) -> tuple[str, str | None] | None:
        with self._reading() as conn:
            row = self._run(conn, q.URL_STATE, {"url": url}).fetchone()
        return None if row is None else (str(row[0]), row[1])


class SqlStore(FrontierReads):
    """:class:`~geminibot.store.crawlstore.CrawlStore` over an engine strategy (its reads
    :class:`FrontierReads`'); every method is one transaction (on SQLite, the crawl
    loop's are batched)."""

    def __init__(
        self,
        engine: EngineStrategy,
        clock: Callable[[], float],
        limits: FrontierLimits | None = None,
    ) -> None:
        super().__init__(engine)
        self.clock = clock
        self.limits = limits or FrontierLimits()
        self.frontier = Frontier(
            engine.dialect, engine.array, clock, self.limits, exclusive=engine.exclusive
        )
        self._writing = engine.writing
        self._committing = engine.committing
        #: The URLs this process claimed whose request was sent (their attempt
        #: counted), until the claim is closed or given back.
        self._sent: set[str] = set()

    def close(self) -> None:
        self.engine.close()

    def end_run(self) -> None:  # (what the engine holds back committed)
        self.engine.end_run()

    # -- the frontier --

    def seed(self, urls: list[str]) -> dict[str, str]:
        """Add seed URLs (depth 0) in one transaction; what happened to each, by the URL
        as given (another name of one met before in the list is ``known``)."""
        with self._committing() as conn:
            added = self.frontier.add(conn, [(url, 0, None) for url in urls])
        result: dict[str, str] = {}
        met: set[str] = set()
        for url in urls:
            name = normalise(url)
            result[url] = "known" if name in met else added[name]
            met.add(name)
        return result

    def recover(self) -> int:
        """Queue again the URLs left leased by a killed run (a live process's claims
        stay theirs), except those whose attempts were cut short
        :data:`~geminibot.store.frontier.MAX_URL_ATTEMPTS` times: recorded failed.
        Returns how many went back to the queue."""
        scope = self.engine.orphaned
        with self._committing() as conn:
            self.engine.recovering(conn)
            self._run(conn, q.give_up(scope), give_up_params(self.clock()))
            return int(self._run(conn, q.requeue_leased(scope)).rowcount)

    def claim(self, host: str, lease: str) -> Claim | None:
        """Lease the oldest queued URL of ``host`` (one another process holds is passed
        over), or None if none (or the host is not ours)."""
        row = None
        with self.engine.claiming(host, lease) as conn:
            if conn is not None:
                row = self._run(conn, q.CLAIM, {"host": host}).fetchone()
            if row is not None:
                params = {"lease": lease, "now": self.clock(), "url": row[0]}
                self._run(conn, q.MARK_LEASED, params)
        if row is None:
            return None
        self._sent.discard(str(row[0]))  # a new claim: nothing sent yet
        return Claim(url=str(row[0]), host=host, depth=int(row[1]))

    # -- hosts shared between crawl processes --

    def lease_host(self, host: str, lease: str) -> Lease | None:
        return self.engine.lease_host(host, lease, self.clock())

    def hold_host(self, host: str, lease: str, claimed: str | None) -> bool:
        """Right before a request to ``host``: whether the host and ``claimed`` are still
        this process's (renewing the lease); counts the claim's attempt at its first
        request, in the same transaction."""
        first = claimed is not None and claimed not in self._sent
        with self.engine.holding(host, lease, claimed, first) as (held, conn):
            if held and first and claimed is not None:
                self._count_attempt(conn, claimed, lease)
        if not held and claimed is not None:
            self._sent.discard(claimed)  # the claim is another process's now
        return bool(held)

    def release_host(self, host: str, lease: str) -> None:
        self.engine.release_host(host, lease)

    def work_elsewhere(self, lease: str) -> dict[str, float]:
        return self.engine.work_elsewhere(lease)

    # -- the run --

    def check_settings(self, settings: dict[str, str]) -> tuple[str, str, str] | None:
        """Record the settings, or return (key, stored, given) for the first that differs."""
        with self._committing() as conn:
            for key, value in settings.items():
                self._run(conn, q.ADD_SETTING, {"key": key, "value": value})
                row = self._run(conn, q.SETTING, {"key": key}).fetchone()
                if row is not None and row[0] != value:
                    return key, str(row[0]), value
        return None

    def record_run(self, key: str, value: str) -> None:
        with self._committing() as conn:
            self._run(conn, q.SET_SETTING, {"key": key, "value": value})

    def host_states(self) -> dict[str, HostState]:
        """Every host's persisted politeness state; clears the skips of the last run."""
        with self._committing() as conn:
            self._run(conn, self.engine.dialect.clear_skips)
            rows = self._run(conn, q.HOST_STATES).fetchall()
        return {str(r[0]): HostState(r[1], r[2], r[3], r[4]) for r in rows}

    # -- hosts, policy files and pins --

    def skip_host(self, host: str, reason: str) -> None:
        with self._committing() as conn:
            self._run(conn, q.SKIP_HOST, {"reason": reason, "host": host})

    def load_policy_file(self, host: str, name: str, now: float) -> CachedFile | None:
        """The cached fetch of ``name`` on ``host`` if it is still fresh at ``now``."""
        with self._reading() as conn:
            row = self._run(conn, q.POLICY_FILE, {"host": host, "name": name}).fetchone()
        return CachedFile.fresh(host, name, row, now)

    def save_policy_file(self, file: CachedFile, fetch: FetchRecord) -> None:
        with self._writing() as conn:
            self._log_fetch(conn, fetch)
            self._run(conn, q.SAVE_POLICY_FILE, file.params())

    def log_fetch(self, fetch: FetchRecord) -> None:
        with self._writing() as conn:
            self._log_fetch(conn, fetch)

    def pin(self, host: str, port: int) -> str | None:
        with self._reading() as conn:
            row = self._run(conn, q.PIN, {"host": host, "port": port}).fetchone()
        return None if row is None else str(row[0])

    def set_pin(self, host: str, port: int, fingerprint: str, now: float) -> None:
        with self._committing() as conn:
            params = {"host": host, "port": port, "fingerprint": fingerprint, "now": now}
            self._run(conn, q.SET_PIN, params)

    def saw_tls(self, record: records.TLSRecord) -> None:
        """Keep a host's TLS and certificate facts as seen (``tls_history``)."""
        with self._writing() as conn:
            self._run(conn, q.SAW_TLS, record.params())

    def _log_fetch(self, conn: Any, fetch: FetchRecord) -> None:
        self._run(conn, q.LOG_FETCH, fetch.params())
        self._run(conn, q.HOST_AFTER_FETCH, fetch.host_params())

    # -- a claimed URL's attempt --

    def _count_attempt(self, conn: Any, url: str, lease: str) -> None:
        """The claimed ``url``'s request is about to be sent (``hold_host``): count its
        attempt, once per claim (a robots2 ask and the URL's own request are one)."""
        if url not in self._sent:
            self._run(conn, q.MARK_SENT, {"url": url, "lease": lease})
            self._sent.add(url)

    # -- closing a claimed URL --

    def release(self, url: str) -> None:
        """Give a leased URL back to the queue. Unsent (a cancelled visit, a policy
        file's wait, the host skipped) its attempts stay as they were before the claim;
        sent (a cancelled request, a robots2 ask to ask again later) the attempt its
        request counted goes back with it, as a 44's does (:meth:`slowed_down`)."""
        with self._writing(closes=True) as conn:
            self._release(conn, url)

    def _release(self, conn: Any, url: str) -> None:
        self._run(conn, q.RELEASE, {"url": url, "sent": url in self._sent})
        self._sent.discard(url)

    def _finish(self, conn: Any, url: str, state: str, reason: str | None = None) -> None:
        """Close a leased URL (only a failure keeps its attempts counted)."""
        self._run(conn, q.FINISH, q.finish_params(url, state, reason, self.clock()))
        self._sent.discard(url)

    def slowed_down(self, fetch: FetchRecord) -> None:
        """The URL's request was answered "slow down": log it, queue the URL again."""
        with self._writing(closes=True) as conn:
            self._log_fetch(conn, fetch)
            self._release(conn, fetch.url)

    def refused(self, decision: Decision, revisit: Revisit | None = None) -> None:
        with self._writing(closes=True) as conn:
            self._run(conn, q.LOG_DECISION, decision.params())
            self._finish(conn, decision.url, "refused", decision.reason)
            self._schedule(conn, decision.url, revisit)

    def failed(
        self, decision: Decision, fetch: FetchRecord, revisit: Revisit | None = None
    ) -> None:
        with self._writing(closes=True) as conn:
            self._run(conn, q.LOG_DECISION, decision.params())
            self._log_fetch(conn, fetch)
            self._finish(conn, decision.url, "failed", fetch.error)
            self._schedule(conn, decision.url, revisit)

    def duplicate_of(self, content_hash: str, url: str) -> str | None:
        with self._reading() as conn:
            row = self._run(conn, q.FIRST_WITH_HASH, {"hash": content_hash, "url": url}).fetchone()
        return None if row is None else str(row[0])

    def fetched(self, fetched: FetchedPage) -> dict[str, int]:
        """Commit a page, its decision and fetch, its links into the frontier and its feed
        (:func:`~geminibot.store.feedstore.visit_feed`); the hosts woken, how many each."""
        page, url = fetched.page, fetched.decision.url
        woken: Counter[str] = Counter()
        with self._writing(closes=True) as conn:
            missing = fetched.gone or fetched.not_found
            links = [] if fetched.unchanged or missing else fetched.links
            # (every host it touches locked first, in one order: no two deadlock)
            batch = self.frontier.prepare(conn, links, also=fetched.fetch.host)
            self._run(conn, q.LOG_DECISION, fetched.decision.params())
            self._log_fetch(conn, fetched.fetch)
            state, reason = "done", None
            if missing:
                state = "gone" if fetched.gone else "not_found"
                reason = f"status {page.status}"
            if fetched.unchanged:
                params = {"at": page.fetched_at, "meta": page.meta, "url": page.url}
                self._run(conn, q.TOUCH_PAGE, params)
            elif not fetched.listed:  # (listed: not found, its last live answer kept)
                old = self._run(conn, q.PAGE_HASH, {"url": page.url}).fetchone()
                self.frontier.admit(conn, batch)
                woken.update(batch.woken)
                write_page(conn, self.engine.dialect, page, fetched.role)
                changed = missing or (old is not None and old[0] != page.content_hash)
                if old is not None and old[1] is None and changed:
                    woken.update(self._requeue_aliases(conn, page.url))
                if fetched.demote is not None:
                    self._demote(conn, fetched.demote, page.url)
                if fetched.gone:
                    self._run(conn, q.HOST_URL_GONE, {"host": fetched.fetch.host})
            visit_feed(self._run, conn, fetched)
            self._finish(conn, url, state, reason)
            self._schedule(conn, url, fetched.revisit)
        return dict(woken)

    def _schedule(self, conn: Any, url: str, revisit: Revisit | None) -> None:
        if revisit is not None:
            params = {"next_visit": revisit.next_visit, "interval": revisit.interval, "url": url}
            self._run(conn, q.SCHEDULE, params)

    def _requeue_aliases(self, conn: Any, url: str) -> list[str]:
        """Queue the aliases of ``url`` again now (their body is no longer its body);
        returns their hosts, one per URL."""
        return [str(r[0]) for r in self._run(conn, q.REQUEUE_ALIASES, {"url": url}).fetchall()]

    def _demote(self, conn: Any, old: str, new: str) -> None:
        """``old`` (and its aliases) become aliases of ``new``; ``old`` leaves the index."""
        self._run(conn, q.REPOINT_ALIASES, {"new": new, "old": old})
        row = self._run(conn, q.PAGE_ID, {"url": old}).fetchone()
        if row is not None:
            self._drop_text(conn, row[0])
            self._run(conn, q.DEMOTE_PAGE, {"new": new, "id": row[0]})

    def _drop_text(self, conn: Any, page_id: int) -> None:
        """A page's text and links out of the index."""
        self._run(conn, self.engine.dialect.drop_text, {"id": page_id})
        self._run(conn, q.DELETE_LINKS, {"id": page_id})

    # -- freshness --

    def previous(self, url: str) -> Visit | None:
        """What the last visit of ``url`` left (None: never visited)."""
        with self._reading() as conn:
            row = self._run(conn, q.PREVIOUS, {"url": url}).fetchone()
        return None if row is None else Visit(*row)  # (feed: EXISTS, 0/1 on SQLite)

    def revisit(self, now: float, everything: bool = False) -> int:
        """Queue the finished URLs due at ``now`` (``everything``: all of them, due or
        not, but those gone; trapped ones never); returns how many."""
        with self._committing() as conn:
            statement = q.REVISIT_ALL if everything else q.REVISIT_DUE
            return int(self._run(conn, statement, {"now": now}).rowcount)

    def revisit_due(self, now: float) -> dict[str, int]:
        """Queue the finished URLs due at ``now``; the hosts that got some, how many each."""
        with self._committing() as conn:
            hosts = self._run(conn, q.DUE_HOSTS, {"now": now}).fetchall()
            if hosts:
                self._run(conn, q.REVISIT_DUE, {"now": now})
        return {str(host): int(n) for host, n in hosts}

    def prune_logs(self, before: float) -> int:
        """Delete the fetch and decision log rows older than ``before``; returns how many."""
        with self._committing() as conn:
            n = self._run(conn, q.PRUNE_FETCHES, {"before": before}).rowcount
            n += self._run(conn, q.PRUNE_DECISIONS, {"before": before}).rowcount
        return int(n)

    def aliases(self, url: str) -> list[str]:
        """The URLs recorded as aliases of the canonical ``url`` (same body)."""
        with self._reading() as conn:
            rows = self._run(conn, q.ALIASES, {"url": url}).fetchall()
        return [str(r[0]) for r in rows]

    def delist_vanished(self, now: float) -> int:
        """Take the pages of the hosts vanished at ``now`` out of the search index (text,
        title, links, hash) and queue their aliases again; returns how many pages."""
        since = {"failures": VANISHED_FAILURES, "since": now - VANISHED_AFTER}
        with self._committing() as conn:
            rows = self._run(conn, q.VANISHED_PAGES, since).fetchall()
            for page_id, url in rows:
                self._drop_text(conn, page_id)
                self._run(conn, q.DELIST_PAGE, {"id": page_id, "now": now})
                self._requeue_aliases(conn, str(url))
        return len(rows)
