""":class:`~geminibot.store.crawlstore.CrawlStore` on PostgreSQL: one frontier and index that
several crawl processes, on one machine or several, share.

Every method is one transaction on a connection of a psycopg 3 pool. The calls are
synchronous, as :class:`~geminibot.store.crawlstore.SqliteStore`'s are: each is a few
statements on an indexed table, and the crawl loop spends its time waiting on the network
and on politeness delays, not on these (``bench/pg_crawl.py`` measures both).

What makes several processes safe (docs/postgres.md):

- **Host leases.** A worker takes its host with :meth:`PgStore.lease_host` before its first
  request: ``SELECT ... FOR UPDATE SKIP LOCKED`` on the host's ``host_leases`` row, which
  is granted when the host is free, its lease has expired, or it is this process's
  already; the lease then lasts ``lease_seconds`` (longer than a request may take). Right
  before every request, after every wait, :meth:`PgStore.hold_host` checks that the host
  and the claimed URL are still this process's and renews the lease; a worker whose lease
  ran out while it waited and whose host another process took over sends nothing. So one
  process at a time sends requests to a host, and the one that takes a host over reads the
  politeness state (last request, 44 back-off) the last holder committed: the pace holds
  across processes.
- **A killed process** stops renewing; when its leases expire, the next process to take
  one of its hosts puts that host's ``leased`` URLs back in the queue (in the same
  transaction). Only the requests that were on the wire at the kill are repeated.
- **Links** are inserted in one statement per page, ``ON CONFLICT (url) DO NOTHING``,
  with the rows of their hosts locked in host order first (:meth:`PgStore._lock_hosts`):
  two processes finding the same link keep one row, the trap bounds are counted exactly,
  and no two transactions deadlock.
- **Policy files** are cached in ``robots`` with their fetch time and expiry, read by all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from geminibot.store import pg, traps
from geminibot.store import statements as q
from geminibot.store.errors import DatabaseError
from geminibot.store.frontier import (
    MAX_URL_ATTEMPTS,
    Claim,
    count_deep,
    linked_again,
    utc_date,
)
from geminibot.store.pages import Page
from geminibot.store.pg_sql import ENGINE
from geminibot.store.records import FetchedPage, HostState, Lease
from geminibot.store.sqlstore import Links, SqlStore
from geminibot.store.traps import CAP_REASON, FrontierLimits, trap_decision, trap_reason
from geminibot.urls import host_key, normalise, parse_url

#: Seconds a host lease lasts unless renewed: longer than a request may take (the clients'
#: 60-second total timeout), since it is renewed just before each request.
LEASE_SECONDS = 90.0
#: The database's clock, in epoch seconds: leases are compared on one clock, whichever
#: machine their holders run on.
NOW = "extract(epoch FROM clock_timestamp())::float8"
#: Connections in a process's pool (workers share them; a call holds one briefly).
POOL_SIZE = 4


class PgStore(SqlStore):
    """The crawl's store on PostgreSQL (see the module docstring): the logic of
    :class:`~geminibot.store.sqlstore.SqlStore`, with host leases and links queued in
    batches."""

    engine = ENGINE

    def __init__(
        self,
        conninfo: str,
        clock: Callable[[], float],
        limits: FrontierLimits | None = None,
        *,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        pg.connect(conninfo).close()  # reachable, and the schema is current
        self.name = pg.display(conninfo)
        self.clock = clock
        self.limits = limits or FrontierLimits()
        self.lease_seconds = lease_seconds
        self._sent: set[str] = set()
        self.pool: ConnectionPool[Any] = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs={"connect_timeout": pg.CONNECT_TIMEOUT},
            open=True,
        )

    def close(self) -> None:
        self.pool.close()

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """One transaction (committed when the block ends, rolled back on an error)."""
        return self.pool.connection()

    def _reading(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._tx()

    def _writing(self, closes: bool = False) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._tx()

    def _committing(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._tx()

    def _page_links(self, conn: psycopg.Connection[Any], fetched: FetchedPage) -> Links:
        """The page's links, normalised, with every host they touch (and the page's own)
        locked in one order (see :meth:`_lock_hosts`)."""
        links = _normalised(fetched.links)
        if links:
            url = fetched.decision.url
            self._lock_hosts(conn, [host_key(url), *(host_key(u) for u, _, _ in links)])
        return links

    def _queue(self, conn: psycopg.Connection[Any], links: Links) -> Counter[str]:
        if not links:
            return Counter()
        added = self._add(conn, links)
        return Counter(host_key(u) for u, what in added.items() if what == "queued")

    def _store_page(self, conn: psycopg.Connection[Any], page: Page, role: str) -> None:
        with conn.cursor() as cur:
            pg.store_page(cur, page, role)

    # -- the run --

    def recover(self) -> int:
        """Queue again the URLs left leased by processes whose host leases have expired
        (a live process's claims stay theirs), except those whose attempts were cut short
        :data:`~geminibot.store.frontier.MAX_URL_ATTEMPTS` times: recorded failed."""
        orphaned = (
            "state = 'leased' AND NOT EXISTS (SELECT 1 FROM host_leases l WHERE l.host = u.host"
            f" AND l.holder IS NOT NULL AND l.lease_until > {NOW})"
        )
        with self._tx() as conn:
            self._give_up(conn, f"{orphaned} AND u.attempts >= %(max)s", {})
            cur = conn.execute(f"UPDATE urls u SET state = 'queued', lease = NULL WHERE {orphaned}")
            return int(cur.rowcount)

    def _give_up(
        self, conn: psycopg.Connection[Any], where: str, params: dict[str, object]
    ) -> None:
        """Record failed the leased URLs matching ``where`` (on ``urls u``) whose attempts
        reached :data:`~geminibot.store.frontier.MAX_URL_ATTEMPTS`."""
        conn.execute(
            "UPDATE urls u SET state = 'failed', lease = NULL, updated_at = %(now)s,"
            " next_visit = NULL, reason = 'given up: ' || attempts || ' attempts ended abnormally'"
            f" WHERE {where}",
            {**params, "now": self.clock(), "max": MAX_URL_ATTEMPTS},
        )

    # -- host leases --

    def lease_host(self, host: str, lease: str) -> Lease | None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO host_leases (host) VALUES (%s) ON CONFLICT DO NOTHING", (host,)
            )
            row = conn.execute(
                f"SELECT holder, lease_until, {NOW} FROM host_leases WHERE host = %s"
                " FOR UPDATE SKIP LOCKED",
                (host,),
            ).fetchone()
            if row is None:
                return None  # another process is taking it this instant
            holder, until, now = row
            if holder is not None and holder != lease and until > now:
                return None
            conn.execute(
                "UPDATE host_leases SET holder = %s, lease_until = %s WHERE host = %s",
                (lease, now + self.lease_seconds, host),
            )
            if holder == lease:
                return Lease(None)
            # Taken over (free, or its holder stopped renewing): its claims go back to the
            # queue, and the pace goes on from the state the last holder committed.
            others = "u.host = %(host)s AND u.state = 'leased' AND u.lease IS DISTINCT FROM %(me)s"
            mine: dict[str, object] = {"host": host, "me": lease}
            self._give_up(conn, f"{others} AND u.attempts >= %(max)s", mine)
            conn.execute(f"UPDATE urls u SET state = 'queued', lease = NULL WHERE {others}", mine)
            state = conn.execute(
                "SELECT last_fetch_at, coalesce(last_duration, 0), not_before, slow_downs"
                " FROM hosts WHERE host = %s",
                (host,),
            ).fetchone()
        return Lease(None if state is None else HostState(*state))

    def hold_host(self, host: str, lease: str, claimed: str | None) -> bool:
        """Whether ``host`` is still this process's, and ``claimed`` (if any) still its
        claim, right before a request (after every wait); renews the lease if so, and
        counts the claim's attempt at its first request (in the same transaction).

        The lease may have run out during the wait without anyone taking the host: it is
        still ours (the holder column names us) and is renewed. Once another process took
        it over, the holder names that process (or nobody, once it let go) and the claim
        was queued again or claimed by it: False, and the request must not be sent."""
        with self._tx() as conn:
            held = conn.execute(
                f"UPDATE host_leases SET lease_until = greatest(lease_until, {NOW} + %(s)s)"
                " WHERE host = %(host)s AND holder = %(me)s AND (%(url)s::text IS NULL OR"
                " EXISTS (SELECT 1 FROM urls WHERE url = %(url)s AND state = 'leased'"
                " AND lease = %(me)s)) RETURNING 1",
                {"s": self.lease_seconds, "host": host, "me": lease, "url": claimed},
            ).fetchone()
            if claimed is not None and held is not None:
                self._count_attempt(conn, claimed, lease)
            elif claimed is not None:
                self._sent.discard(claimed)  # the claim is another process's now
        return held is not None

    def release_host(self, host: str, lease: str) -> None:
        with self._tx() as conn:
            conn.execute(
                "UPDATE host_leases SET holder = NULL, lease_until = 0"
                " WHERE host = %s AND holder = %s",
                (host, lease),
            )

    def work_elsewhere(self, lease: str) -> dict[str, float]:
        """Hosts with work (queued or leased URLs) not held by ``lease`` nor skipped, each
        with the seconds until it may be taken (0: free now)."""
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT w.host, CASE WHEN l.holder IS NULL OR l.lease_until <= {NOW}"
                f" THEN 0 ELSE l.lease_until - {NOW} END"
                " FROM (SELECT DISTINCT host FROM urls WHERE state IN ('queued', 'leased')) w"
                " JOIN hosts h ON h.host = w.host"
                " LEFT JOIN host_leases l ON l.host = w.host"
                " WHERE h.skipped_reason IS NULL AND l.holder IS DISTINCT FROM %(me)s",
                {"me": lease},
            ).fetchall()
        return {str(host): float(wait) for host, wait in rows}

    # -- the frontier --

    def seed(self, urls: list[str]) -> dict[str, str]:
        """As :meth:`Frontier.seed`: each URL normalised before the frontier; what happened
        to each, by the URL as given (one met again, or another name of one met before in
        the list, is ``known``, as when Frontier.add is called once per URL)."""
        names = [normalise(url) for url in urls]
        with self._tx() as conn:
            added = self._add(conn, [(name, 0, None) for name in names])
        result: dict[str, str] = {}
        met: set[str] = set()
        for url, name in zip(urls, names, strict=True):
            result[url] = "known" if name in met else added[name]
            met.add(name)
        return result

    def _lock_hosts(
        self, conn: psycopg.Connection[Any], hosts: Iterable[str]
    ) -> dict[str, tuple[int, int | None]]:
        """Create the missing ``hosts`` rows and lock them all, in host order, until the
        transaction ends; returns each one's live URLs (``urls_total``) and deep URLs
        (``deep_urls``, None: not counted yet).

        Every transaction that adds URLs to a host holds its row, so the trap bounds are
        counted exactly across processes (no two add to one host at once), and, as the
        locks are taken in one order, two pages linking to each other's hosts cannot
        deadlock."""
        ordered = sorted(set(hosts))
        conn.execute(
            "INSERT INTO hosts (host, first_seen) SELECT h, %s FROM unnest(%s::text[]) AS h"
            " ORDER BY h ON CONFLICT DO NOTHING",
            (self.clock(), ordered),
        )
        rows = conn.execute(
            "SELECT host, urls_total, deep_urls FROM hosts WHERE host = ANY(%s)"
            " ORDER BY host FOR UPDATE",
            (ordered,),
        ).fetchall()
        return {str(host): (int(total), deep) for host, total, deep in rows}

    def _add(
        self, conn: psycopg.Connection[Any], links: Iterable[tuple[str, int, str | None]]
    ) -> dict[str, str]:
        """Put URLs in the frontier (one batch), as :meth:`Frontier.add` does one by one:
        each normalised first, the trap bounds applied in the order the URLs are met, and a
        URL trapped by the per-host cap queued again once its host has room. Returns what
        happened to each (by normalised URL)."""
        batch: dict[str, tuple[int, str | None]] = {}
        for url, depth, parent in links:
            batch.setdefault(normalise(url), (depth, parent))
        if not batch:
            return {}
        locked = self._lock_hosts(conn, (host_key(u) for u in batch))
        counts = {host: _Counts(*both) for host, both in locked.items()}
        known = {
            str(r[0]): (str(r[1]), r[2])
            for r in conn.execute(
                "SELECT url, state, reason FROM urls WHERE url = ANY(%s)", (list(batch),)
            ).fetchall()
        }
        now = self.clock()
        today = utc_date(now)
        result: dict[str, str] = {}
        queries: dict[tuple[str, str], int] = {}
        rows: list[tuple[str, str, str, bool, int, str | None, str, str | None]] = []
        for url, (depth, parent) in batch.items():
            parsed = parse_url(url)
            host, path, has_query = host_key(url), parsed.path, parsed.query is not None
            if has_query and (host, path) not in queries:
                queries[(host, path)] = _queries_on(conn, host, path)
            host_counts = counts[host]
            if url in known:
                what = self._requeue_capped(conn, url, known[url], host_counts.total, now)
            else:
                deep = None
                if traps.is_deep(path):
                    deep = host_counts.deep_urls(conn, host)
                near = traps.calendar_neighbours(parsed, today)
                reason = trap_reason(
                    self.limits,
                    parsed,
                    depth,
                    host_counts.total,
                    queries.get((host, path)),
                    today=today,
                    deep_on_host=deep,
                    known=_held(conn, near) | (near & result.keys()) if near else (),
                )
                what = "queued" if reason is None else f"trapped: {reason}"
                state = "trapped" if reason else "queued"
                rows.append((url, host, path, has_query, depth, parent, state, reason))
            result[url] = what
            if what == "queued":
                host_counts.queued(path)
                if has_query:
                    queries[(host, path)] += 1
        self._insert(conn, rows, now)
        self._linked_again(conn, [u for u, (state, _) in known.items() if state == "not_found"])
        for host in sorted(locked):
            counts[host].save(conn, host, locked[host])
        return result

    def _linked_again(self, conn: psycopg.Connection[Any], urls: list[str]) -> None:
        """Links met again to these not-found URLs: each due sooner
        (:func:`~geminibot.store.frontier.linked_again`)."""
        if urls:
            now = self.clock()
            with conn.cursor() as cur:
                cur.executemany(
                    self.engine.sql[q.LINKED_AGAIN], [linked_again(u, now) for u in urls]
                )

    def claim(self, host: str, lease: str) -> Claim | None:
        now = self.clock()
        with self._tx() as conn:
            held = conn.execute(
                f"UPDATE host_leases SET lease_until = greatest(lease_until, {NOW} + %s)"
                f" WHERE host = %s AND holder = %s AND lease_until > {NOW} RETURNING 1",
                (self.lease_seconds, host, lease),
            ).fetchone()
            if held is None:
                return None  # the host is not ours (any more)
            row = conn.execute(
                "SELECT url, depth FROM urls WHERE host = %s AND state = 'queued'"
                " ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
                (host,),
            ).fetchone()
            if row is None:
                return None
            self._run(conn, q.MARK_LEASED, {"lease": lease, "now": now, "url": row[0]})
        self._sent.discard(str(row[0]))  # a new claim: nothing sent yet
        return Claim(url=str(row[0]), host=host, depth=int(row[1]))

    # -- hosts and policy files --

    # -- closing a claimed URL --

    def _insert(
        self,
        conn: psycopg.Connection[Any],
        rows: list[tuple[str, str, str, bool, int, str | None, str, str | None]],
        now: float,
    ) -> None:
        """Insert new ``urls`` rows, in the order given (the order they were met). Their
        hosts are locked (:meth:`_lock_hosts`): no other process inserts them meanwhile."""
        if rows:
            conn.execute(
                "INSERT INTO urls (url, host, path, has_query, depth, parent, state, reason,"
                " updated_at) SELECT u, h, p, q, d, par, s, r, %s FROM unnest(%s::text[],"
                " %s::text[], %s::text[], %s::boolean[], %s::int[], %s::text[], %s::text[],"
                " %s::text[]) WITH ORDINALITY AS x (u, h, p, q, d, par, s, r, n)"
                " ORDER BY n ON CONFLICT (url) DO NOTHING",
                (now, *(list(column) for column in zip(*rows, strict=True))),
            )
        trapped = [(url, host, trap_decision(reason)) for url, host, *_, reason in rows if reason]
        if trapped:  # each one's refusing decision, as Frontier.add records it
            conn.execute(
                "INSERT INTO decisions (url, host, allowed, reason, at) SELECT u, h, false, r, %s"
                " FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS x (u, h, r, n)"
                " ORDER BY n",
                (now, *(list(column) for column in zip(*trapped, strict=True))),
            )

    def _requeue_capped(
        self,
        conn: psycopg.Connection[Any],
        url: str,
        known: tuple[str, str | None],
        host_total: int,
        now: float,
    ) -> str:
        """A known URL met again: ``queued`` again if the per-host cap trapped it and its
        host has room now (the cap counts live URLs, as :meth:`Frontier.add` does);
        otherwise ``known``."""
        state, reason = known
        capped = state == "trapped" and str(reason).endswith(CAP_REASON)
        if not capped or host_total >= self.limits.max_urls_per_host:
            return "known"
        self._run(conn, q.REQUEUE_CAPPED, {"now": now, "url": url})
        return "queued"

    # -- freshness --

    def end_run(self) -> None:
        """Nothing waits: every call commits its own transaction."""


@dataclass
class _Counts:
    """A host's live URLs (``urls_total``) and deep URLs (``deep_urls``, None: not counted
    yet) while a batch of URLs is added (its row locked: see :meth:`PgStore._lock_hosts`)."""

    total: int
    deep: int | None

    def deep_urls(self, conn: psycopg.Connection[Any], host: str) -> int:
        """The deep URLs, counted from the host's rows the first time."""
        if self.deep is None:
            self.deep = count_deep(conn.execute(ENGINE.sql[q.DEEP_PATHS], {"host": host}))
        return self.deep

    def save(self, conn: psycopg.Connection[Any], host: str, was: tuple[int, int | None]) -> None:
        """Write the counts to the host's row, if they moved from ``was``."""
        if (self.total, self.deep) != was:
            conn.execute(
                "UPDATE hosts SET urls_total = %s, deep_urls = %s WHERE host = %s",
                (self.total, self.deep, host),
            )

    def queued(self, path: str) -> None:
        """One more live URL, at ``path``."""
        self.total += 1
        if self.deep is not None and traps.is_deep(path):
            self.deep += 1


def open_store(
    conninfo: str,
    clock: Callable[[], float],
    limits: FrontierLimits | None = None,
    *,
    lease_seconds: float = LEASE_SECONDS,
) -> PgStore:
    """A :class:`PgStore`; raise :class:`~geminibot.store.db.DatabaseError` (one line)."""
    try:
        return PgStore(conninfo, clock, limits, lease_seconds=lease_seconds)
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        raise DatabaseError(f"{pg.display(conninfo)}: {reason}") from None


def _held(conn: psycopg.Connection[Any], urls: Collection[str]) -> set[str]:
    """Those of ``urls`` the frontier holds (in any state)."""
    rows = conn.execute("SELECT url FROM urls WHERE url = ANY(%s)", (list(urls),)).fetchall()
    return {str(row[0]) for row in rows}


def _queries_on(conn: psycopg.Connection[Any], host: str, path: str) -> int:
    """The query strings on ``host``'s ``path`` not trapped (the bound's count)."""
    row = conn.execute(
        "SELECT count(*) FROM urls WHERE host = %s AND path = %s"
        " AND has_query AND state != 'trapped'",
        (host, path),
    ).fetchone()
    return int(row[0]) if row else 0


def _normalised(links: Iterable[tuple[str, int, str | None]]) -> list[tuple[str, int, str | None]]:
    """The links with their URLs normalised as the frontier keeps them."""
    return [(normalise(url), depth, parent) for url, depth, parent in links]
