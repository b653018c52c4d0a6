""":class:`~geminibot.store.crawlstore.CrawlStore` on PostgreSQL: one frontier and index that
several crawl processes, on one machine or several, share.

Every method is one transaction on a connection of a psycopg 3 pool. The calls are
synchronous, as :class:`~geminibot.store.crawlstore.SqliteStore`'s are: each is a few
statements on an indexed table, and the crawl loop spends its time waiting on the network
and on politeness delays, not on these (``bench/pg_crawl.py`` measures both).

What makes several processes safe (docs/postgres.md):

- **Host leases.** A worker takes its host with :meth:`PgEngine.lease_host` before its first
  request: ``SELECT ... FOR UPDATE SKIP LOCKED`` on the host's ``host_leases`` row, which
  is granted when the host is free, its lease has expired, or it is this process's
  already; the lease then lasts ``lease_seconds`` (longer than a request may take). Right
  before every request, after every wait, :meth:`PgEngine.holding` checks that the host
  and the claimed URL are still this process's and renews the lease; a worker whose lease
  ran out while it waited and whose host another process took over sends nothing. So one
  process at a time sends requests to a host, and the one that takes a host over reads the
  politeness state (last request, 44 back-off) the last holder committed: the pace holds
  across processes.
- **A killed process** stops renewing; when its leases expire, the next process to take
  one of its hosts puts that host's ``leased`` URLs back in the queue (in the same
  transaction). Only the requests that were on the wire at the kill are repeated.
- **Links** are inserted ``ON CONFLICT (url) DO NOTHING``, with the rows of their hosts
  locked in host order first (:meth:`geminibot.store.frontier.Frontier.lock_hosts`): two
  processes finding the same link keep one row, the trap bounds are counted exactly, and
  no two transactions deadlock.
- **Policy files** are cached in ``robots`` with their fetch time and expiry, read by all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg_pool import ConnectionPool

from geminibot.store import pg
from geminibot.store import statements as q
from geminibot.store.errors import DatabaseError
from geminibot.store.frontier import give_up_params
from geminibot.store.pg_sql import ENGINE
from geminibot.store.records import HostState, Lease
from geminibot.store.sqlstore import SqlStore
from geminibot.store.traps import FrontierLimits

#: Seconds a host lease lasts unless renewed: longer than a request may take (the clients'
#: 60-second total timeout), since it is renewed just before each request.
LEASE_SECONDS = 90.0
#: The database's clock, in epoch seconds: leases are compared on one clock, whichever
#: machine their holders run on.
NOW = "extract(epoch FROM clock_timestamp())::float8"
#: Connections in a process's pool (workers share them; a call holds one briefly).
POOL_SIZE = 4

#: A host taken over from a holder that stopped renewing: the claims it left.
_TAKEN_OVER = "u.host = :host AND u.lease IS DISTINCT FROM :me"
TAKEN_OVER_GIVE_UP = q.give_up(_TAKEN_OVER)
TAKEN_OVER_REQUEUE = q.requeue_leased(_TAKEN_OVER)
ADD_LEASE = sa.text("INSERT INTO host_leases (host) VALUES (:host) ON CONFLICT DO NOTHING")
#: A host's lease, unless another process is taking it this instant.
LEASE = sa.text(
    f"SELECT holder, lease_until, {NOW} FROM host_leases WHERE host = :host FOR UPDATE SKIP LOCKED"
)
TAKE_LEASE = sa.text("UPDATE host_leases SET holder = :me, lease_until = :until WHERE host = :host")
#: The lease renewed right before a request, if the host and the claim (if any) are ours.
HOLD = sa.text(
    f"UPDATE host_leases SET lease_until = greatest(lease_until, {NOW} + :seconds)"
    " WHERE host = :host AND holder = :me AND (CAST(:url AS text) IS NULL OR"
    " EXISTS (SELECT 1 FROM urls WHERE url = :url AND state = 'leased' AND lease = :me))"
    " RETURNING 1"
)
#: The lease renewed before a claim, if it has not run out.
RENEW = sa.text(
    f"UPDATE host_leases SET lease_until = greatest(lease_until, {NOW} + :seconds)"
    f" WHERE host = :host AND holder = :me AND lease_until > {NOW} RETURNING 1"
)
LET_GO = sa.text(
    "UPDATE host_leases SET holder = NULL, lease_until = 0 WHERE host = :host AND holder = :me"
)
#: Hosts with work (queued or leased URLs) not held by ``:me`` nor skipped, each with the
#: seconds until it may be taken (0: free now).
ELSEWHERE = sa.text(
    f"SELECT w.host, CASE WHEN l.holder IS NULL OR l.lease_until <= {NOW}"
    f" THEN 0 ELSE l.lease_until - {NOW} END"
    " FROM (SELECT DISTINCT host FROM urls WHERE state IN ('queued', 'leased')) w"
    " JOIN hosts h ON h.host = w.host LEFT JOIN host_leases l ON l.host = w.host"
    " WHERE h.skipped_reason IS NULL AND l.holder IS DISTINCT FROM :me"
)


class PgEngine:
    """The PostgreSQL strategy of :class:`~geminibot.store.sqlstore.SqlStore` (see the
    module docstring): a pooled connection and transaction per call, host leases."""

    dialect = ENGINE
    exclusive = False
    #: Leased URLs whose host no live process holds.
    orphaned = (
        "NOT EXISTS (SELECT 1 FROM host_leases l WHERE l.host = u.host"
        f" AND l.holder IS NOT NULL AND l.lease_until > {NOW})"
    )

    def __init__(self, conninfo: str, *, lease_seconds: float = LEASE_SECONDS) -> None:
        pg.connect(conninfo).close()  # reachable, and the schema is current
        self.name = pg.display(conninfo)
        self.lease_seconds = lease_seconds
        self.pool: ConnectionPool[Any] = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs={"connect_timeout": pg.CONNECT_TIMEOUT},
            open=True,
        )
        self.sql = ENGINE.sql

    def close(self) -> None:
        self.pool.close()

    def array(self, values: list[str]) -> list[str]:
        return values

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """One transaction (committed when the block ends, rolled back on an error)."""
        return self.pool.connection()

    def reading(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._tx()

    def writing(self, closes: bool = False) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._tx()

    def committing(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._tx()

    def recovering(self, conn: psycopg.Connection[Any]) -> None:
        """(Nothing to note: a live process's claims stay theirs.)"""

    def end_run(self) -> None:
        """Nothing waits: every call commits its own transaction."""

    # -- host leases --

    def lease_host(self, host: str, lease: str, now: float) -> Lease | None:
        with self._tx() as conn:
            conn.execute(self.sql[ADD_LEASE], {"host": host})
            row = conn.execute(self.sql[LEASE], {"host": host}).fetchone()
            if row is None:
                return None  # another process is taking it this instant
            holder, until, db_now = row
            if holder is not None and holder != lease and until > db_now:
                return None
            params = {"me": lease, "until": db_now + self.lease_seconds, "host": host}
            conn.execute(self.sql[TAKE_LEASE], params)
            if holder == lease:
                return Lease(None)
            # Taken over (free, or its holder stopped renewing): its claims go back to
            # the queue, and the pace goes on from the state the last holder committed.
            mine = give_up_params(now, host=host, me=lease)
            conn.execute(self.sql[TAKEN_OVER_GIVE_UP], mine)
            conn.execute(self.sql[TAKEN_OVER_REQUEUE], mine)
            state = conn.execute(self.sql[q.HOST_STATE], {"host": host}).fetchone()
        return Lease(None if state is None else HostState(*state))

    @contextmanager
    def holding(
        self, host: str, lease: str, claimed: str | None, first: bool
    ) -> Iterator[tuple[bool, psycopg.Connection[Any]]]:
        """The lease may have run out during the wait without anyone taking the host: it
        is still ours (the holder column names us) and is renewed. Once another process
        took it over, the holder names that process (or nobody, once it let go) and the
        claim was queued again or claimed by it: not held."""
        params = {"seconds": self.lease_seconds, "host": host, "me": lease, "url": claimed}
        with self._tx() as conn:
            held = conn.execute(self.sql[HOLD], params).fetchone()
            yield held is not None, conn

    @contextmanager
    def claiming(self, host: str, lease: str) -> Iterator[psycopg.Connection[Any] | None]:
        params = {"seconds": self.lease_seconds, "host": host, "me": lease}
        with self._tx() as conn:
            held = conn.execute(self.sql[RENEW], params).fetchone()
            yield None if held is None else conn  # None: the host is not ours (any more)

    def release_host(self, host: str, lease: str) -> None:
        with self._tx() as conn:
            conn.execute(self.sql[LET_GO], {"host": host, "me": lease})

    def work_elsewhere(self, lease: str) -> dict[str, float]:
        with self._tx() as conn:
            rows = conn.execute(self.sql[ELSEWHERE], {"me": lease}).fetchall()
        return {str(host): float(wait) for host, wait in rows}


class PgStore(SqlStore):
    """The crawl's store on PostgreSQL (:class:`PgEngine`)."""

    engine: PgEngine

    def __init__(
        self,
        conninfo: str,
        clock: Callable[[], float],
        limits: FrontierLimits | None = None,
        *,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        super().__init__(PgEngine(conninfo, lease_seconds=lease_seconds), clock, limits)


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
