"""The crawl store's logic, written once for both engines (:class:`SqlStore`).

:class:`~geminibot.store.crawlstore.SqliteStore` and :class:`~geminibot.store.pgstore.PgStore`
run the same methods on the same statements (:mod:`geminibot.store.statements`,
compiled for their engine); each gives only what differs: how a call gets its connection
and transaction (SQLite batches the crawl loop's writes, PostgreSQL takes a pooled
connection per call), how a page's links enter the frontier (one by one, or in one
batch with the hosts locked in order), how a page is written (FTS5 or ``tsvector``), and
the claims and host leases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa

from geminibot.store import statements as q
from geminibot.store.feedstore import TOUCH_FEED, drop_feed, store_feed
from geminibot.store.freshness import VANISHED_AFTER, VANISHED_FAILURES, Visit
from geminibot.store.pages import Page
from geminibot.store.records import (
    CachedFile,
    DecisionRecord,
    FetchedPage,
    FetchRecord,
    HostState,
    Revisit,
)
from geminibot.store.statements import Engine
from geminibot.store.traps import FrontierLimits
from geminibot.urls import host_key

#: A page's links to queue: (URL, depth, parent).
Links = list[tuple[str, int, str | None]]


class SqlStore:
    """What both crawl stores do, over a DBAPI connection (sqlite3's or psycopg's)."""

    engine: Engine
    clock: Callable[[], float]
    limits: FrontierLimits
    #: The URLs this process claimed whose request was sent (their attempt counted),
    #: until the claim is closed or given back.
    _sent: set[str]

    # -- what each engine gives --

    def _reading(self) -> AbstractContextManager[Any]:
        """A connection to read from."""
        raise NotImplementedError

    def _writing(self, closes: bool = False) -> AbstractContextManager[Any]:
        """A write of the crawl loop's hot path (``closes``: it closes a claimed URL)."""
        raise NotImplementedError

    def _committing(self) -> AbstractContextManager[Any]:
        """A write committed when it ends."""
        raise NotImplementedError

    def _page_links(self, conn: Any, fetched: FetchedPage) -> Links:
        """The links of a page to queue, taken before anything else is written for it
        (a page fetched unchanged, or gone, queues none)."""
        raise NotImplementedError

    def _queue(self, conn: Any, links: Links) -> Counter[str]:
        """Put ``links`` in the frontier; the hosts that got newly queued URLs."""
        raise NotImplementedError

    def _store_page(self, conn: Any, page: Page, role: str) -> None:
        raise NotImplementedError

    def _run(
        self, conn: Any, statement: sa.TextClause, params: dict[str, Any] | None = None
    ) -> Any:
        """Run ``statement`` on ``conn``; its cursor."""
        return conn.execute(self.engine.sql[statement], {} if params is None else params)

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
            self._run(conn, self.engine.clear_skips)
            rows = self._run(conn, q.HOST_STATES).fetchall()
        return {str(r[0]): HostState(r[1], r[2], r[3], r[4]) for r in rows}

    def hosts_with_work(self) -> dict[str, int]:
        with self._reading() as conn:
            rows = self._run(conn, q.HOSTS_WITH_WORK).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    def count_pages(self) -> int:
        return self._count(q.COUNT_PAGES)

    def count_hosts(self) -> int:
        return self._count(q.COUNT_HOSTS)

    def queued(self) -> int:
        return self._count(q.COUNT_QUEUED)

    def _count(self, statement: sa.TextClause) -> int:
        with self._reading() as conn:
            row = self._run(conn, statement).fetchone()
        return int(row[0]) if row else 0

    def leased(self) -> list[str]:
        with self._reading() as conn:
            return [str(r[0]) for r in self._run(conn, q.LEASED).fetchall()]

    def state_of(self, url: str) -> tuple[str, str | None] | None:
        with self._reading() as conn:
            row = self._run(conn, q.URL_STATE, {"url": url}).fetchone()
        return None if row is None else (str(row[0]), row[1])

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

    def _log_fetch(self, conn: Any, fetch: FetchRecord) -> None:
        self._run(conn, q.LOG_FETCH, fetch.params())
        self._run(conn, q.HOST_AFTER_FETCH, fetch.host_params())

    def _record_decision(self, conn: Any, decision: DecisionRecord) -> None:
        self._run(conn, q.LOG_DECISION, decision.params())

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
        """Close a leased URL as done/refused/failed/gone: only a failure keeps its
        attempts counted."""
        params = {
            "state": state,
            "reason": reason,
            "now": self.clock(),
            "failed": state == "failed",
        }
        self._run(conn, q.FINISH, {**params, "url": url})
        self._sent.discard(url)

    def slowed_down(self, fetch: FetchRecord) -> None:
        """The URL's request was answered "slow down": log it, queue the URL again."""
        with self._writing(closes=True) as conn:
            self._log_fetch(conn, fetch)
            self._release(conn, fetch.url)

    def refused(self, decision: DecisionRecord, revisit: Revisit | None = None) -> None:
        with self._writing(closes=True) as conn:
            self._record_decision(conn, decision)
            self._finish(conn, decision.url, "refused", decision.reason)
            self._schedule(conn, decision.url, revisit)

    def failed(
        self, decision: DecisionRecord, fetch: FetchRecord, revisit: Revisit | None = None
    ) -> None:
        with self._writing(closes=True) as conn:
            self._record_decision(conn, decision)
            self._log_fetch(conn, fetch)
            self._finish(conn, decision.url, "failed", fetch.error)
            self._schedule(conn, decision.url, revisit)

    def duplicate_of(self, content_hash: str, url: str) -> str | None:
        with self._reading() as conn:
            row = self._run(conn, q.FIRST_WITH_HASH, {"hash": content_hash, "url": url}).fetchone()
        return None if row is None else str(row[0])

    def fetched(self, fetched: FetchedPage) -> dict[str, int]:
        """Commit a page, its decision and fetch, its links into the frontier, and the
        feed it is (if it is one: :func:`~geminibot.store.feedstore.store_feed`); returns the hosts that got newly queued URLs, with how many."""
        page, url = fetched.page, fetched.decision.url
        woken: Counter[str] = Counter()
        with self._writing(closes=True) as conn:
            links = [] if fetched.unchanged or fetched.gone else self._page_links(conn, fetched)
            self._record_decision(conn, fetched.decision)
            self._log_fetch(conn, fetched.fetch)
            if fetched.unchanged:
                params = {"at": page.fetched_at, "meta": page.meta, "url": page.url}
                self._run(conn, q.TOUCH_PAGE, params)
                if fetched.was_feed:
                    self._run(conn, TOUCH_FEED, {"at": page.fetched_at, "url": page.url})
                self._finish(conn, url, "done")
            else:
                old = self._run(conn, q.PAGE_HASH, {"url": page.url}).fetchone()
                woken.update(self._queue(conn, links))
                self._store_page(conn, page, fetched.role)
                if fetched.feed is not None:
                    store_feed(self._run, conn, page.url, page.host, fetched.feed, page.fetched_at)
                elif fetched.was_feed:
                    drop_feed(self._run, conn, page.url, page.fetched_at)
                changed = fetched.gone or (old is not None and old[0] != page.content_hash)
                if old is not None and old[1] is None and changed:
                    woken.update(self._requeue_aliases(conn, page.url))
                if fetched.demote is not None:
                    self._demote(conn, fetched.demote, page.url)
                if fetched.gone:
                    self._finish(conn, url, "gone", f"status {page.status}")
                    self._run(conn, q.HOST_URL_GONE, {"host": host_key(url)})
                else:
                    self._finish(conn, url, "done")
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
        self._run(conn, self.engine.drop_text, {"id": page_id})
        self._run(conn, q.DELETE_LINKS, {"id": page_id})

    # -- freshness --

    def previous(self, url: str) -> Visit | None:
        """What the last visit of ``url`` left (None: never visited)."""
        with self._reading() as conn:
            row = self._run(conn, q.PREVIOUS, {"url": url}).fetchone()
        if row is None:
            return None
        status, content_hash, duplicate_of, interval, attempts, changed_at, gone_at, feed = row
        return Visit(
            status, content_hash, duplicate_of, interval, attempts, changed_at, gone_at, bool(feed)
        )

    def revisit(self, now: float, everything: bool = False) -> int:
        """Queue the finished URLs due at ``now`` (``everything``: all of them, due or
        not; ``gone`` and trapped ones never); returns how many."""
        with self._committing() as conn:
            if everything:
                return int(self._run(conn, q.REVISIT_ALL).rowcount)
            return int(self._run(conn, q.REVISIT_DUE, {"now": now}).rowcount)

    def requeue(self, url: str) -> bool:
        """Queue the finished ``url`` again now (a submission: see
        :mod:`geminibot.store.submissions`); False when it is not finished (queued,
        leased, trapped) or not known."""
        with self._committing() as conn:
            return bool(self._run(conn, q.REQUEUE, {"url": url}).rowcount)

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
