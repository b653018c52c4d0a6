"""Link authority computed again on a schedule and applied to search without a rebuild.

:func:`refresh` computes authority into either store
(:func:`~geminibot.index.authority.compute_authority`) and, on SQLite, gives the new
weights to the derived index (:func:`~geminibot.index.tantivy_index.apply_weights`): its
searches apply them from their next query, and no document is re-added. PostgreSQL's
search reads the ``authority`` table at each query, so there the new weights apply as
their transaction commits. :func:`schedule` calls a job every ``interval`` seconds on an
injected clock, the first time when the store's last computation is that old
(``geminibot index authority --every SECONDS``; the service's ``authority_every``); on a
store never ranked, once the crawl has been round the seeds' reach (:class:`Reach`:
ranking the first hosts fetched would favour them until the next computation), and
sooner than the interval when the store has grown several-fold since the last.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from geminibot.index.authority import compute_authority
from geminibot.store.authority import authority_writer

if TYPE_CHECKING:
    import sqlalchemy as sa

    from geminibot.store.database import Database

#: Seconds before a job that found nothing to do (no pages yet) is tried again, when the
#: interval is longer.
IDLE_RETRY = 60.0


def refresh(
    database: Database, trusted: list[str] | None, progress: Callable[[str], None] | None = None
) -> dict[str, object] | None:
    """Compute authority into ``database`` and apply it to search; a summary (pages,
    hosts, host links, trusted hosts, where it was applied, seconds), or None when the
    store has no page with text yet."""
    from geminibot.store import statements as q

    pages = int(database.run(q.COUNT_SEARCHABLE).fetchone()[0])
    if not pages:
        return None
    write = authority_writer(database)
    summary = compute_authority(database.connection, trusted, progress, write)
    conn = database.sqlite
    if conn is not None:  # the derived tantivy index beside the file reads the weights
        from geminibot.index.tantivy_index import apply_weights

        hosts = apply_weights(conn)
        applied = "no search index yet" if hosts is None else "search index"
    else:  # PostgreSQL's own index
        applied = "postgresql"
    return {
        "pages": pages,
        "hosts": int(summary["hosts"]),
        "host_links": int(summary["links"]),
        "trusted_hosts": int(summary["trusted"]) or "all",
        "applied_to": applied,
        "seconds": round(float(summary["seconds"]), 2),
    }


@dataclass(frozen=True)
class Reach:
    """What the store holds, for :func:`schedule` to judge whether link authority is worth
    computing now: its pages, the pages the last computation ranked (the ``authority``
    table's rows), the hosts the crawl knows and those of them that still have a URL
    waiting for its first visit (None when not asked: once computed, only growth counts)."""

    pages: int
    ranked: int
    hosts: int = 0
    waiting_hosts: int | None = None

    def first_pass_over(self) -> bool:
        """Whether the crawl has been round the seeds' reach: no known host has a URL
        waiting for its first visit, or :data:`READY_SHARE` of them have none."""
        if self.waiting_hosts is None or self.hosts == 0:
            return self.waiting_hosts is None
        return (
            self.waiting_hosts == 0 or self.hosts - self.waiting_hosts >= READY_SHARE * self.hosts
        )

    def grown(self) -> bool:
        """Whether the store holds :data:`GROWTH` times the pages last ranked."""
        return self.ranked > 0 and self.pages >= GROWTH * self.ranked


#: Seconds between two looks at whether the crawl's first pass is over (a scan of the
#: URLs queued, made only until authority is first computed), at least; and the share of
#: the time those looks may take at most (a longer scan on a large store is made less often).
FIRST_PASS_POLL = 5.0
POLL_SHARE = 0.05
#: Share of the known hosts whose URLs have all been visited once after which the first
#: computation runs although a few hosts (unreachable, slow) still have URLs waiting.
READY_SHARE = 0.9
#: How many times the pages last ranked the store must hold for authority to be computed
#: again before its interval is up.
GROWTH = 4.0


def store_reach(database: Database, first: bool) -> Reach:
    """The store's :class:`Reach`; the hosts (a scan of the URLs queued) only when
    ``first`` (authority never computed)."""

    from geminibot.store import statements as q

    def count(statement: sa.TextClause) -> int:
        return int(database.run(statement).fetchone()[0])

    pages, ranked = count(q.COUNT_PAGES), count(q.COUNT_RANKED)
    if not first:
        return Reach(pages, ranked)
    return Reach(pages, ranked, count(q.COUNT_HOSTS), count(q.COUNT_HOSTS_WAITING))


def schedule(
    job: Callable[[], bool],
    interval: float,
    last: float | None,
    stopping: Callable[[], bool],
    wait: Callable[[float], object],
    clock: Callable[[], float] = time.time,
    reach: Callable[[bool], Reach] | None = None,
) -> int:
    """Call ``job()`` every ``interval`` seconds of ``clock`` until ``stopping()``; returns
    how many times it ran. The first call is due ``interval`` after ``last`` (the store's
    last computation, and never later than ``interval`` from now); when there is none, as
    soon as ``reach(True)`` says the crawl's first pass is over (asked every
    :data:`FIRST_PASS_POLL` seconds, or less often when an answer after the first, which
    pays for the process's start, takes more than :data:`POLL_SHARE` of that; at once
    without ``reach``). Between two calls, ``reach(False)``
    is asked every :data:`IDLE_RETRY` seconds: a store grown :data:`GROWTH`-fold gets the
    next call then.
    ``wait(seconds)`` sleeps (a stop may cut it short). A job that returns False (it
    found nothing to do) is tried again after at most :data:`IDLE_RETRY` seconds."""
    now = clock()
    computed = last is not None
    due = now if last is None else min(last + interval, now + interval)
    ran = now - IDLE_RETRY
    runs = 0
    looked = 0.0  # seconds the last look at the first pass took (0 after the first look)
    looks = 0
    while not stopping():
        now = clock()
        if not computed:
            ready = now >= due and (reach is None or reach(True).first_pass_over())
            looked = clock() - now if looks else 0.0
            looks += 1
        else:
            ready = now >= due or (
                reach is not None and now - ran >= IDLE_RETRY and reach(False).grown()
            )
        if not ready:
            left = due - now if due > now else IDLE_RETRY
            poll = IDLE_RETRY if computed else max(FIRST_PASS_POLL, looked / POLL_SHARE)
            wait(left if reach is None else min(left, poll))
            continue
        ran = clock()
        done = job()
        runs += 1
        computed = computed or done
        due = ran + (interval if done else min(interval, IDLE_RETRY))
    return runs
