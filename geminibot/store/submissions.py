"""A URL submitted to be fetched soon (the search capsule's ``/submit``, Antenna-style).

A URL the store holds is made due now by the store's one routine for that,
:func:`geminibot.store.recheck.recheck` (as ``geminibot recheck`` does: a finished URL,
even a gone one, is asked again; one queued or being fetched is left as it is; a trapped
one is never fetched). A URL the store does not hold is put in the frontier as the crawl
puts a seed (:meth:`CrawlStore.seed`: normalised, the trap bounds applied, its host's row
made). A continuous crawl takes either within :data:`~geminibot.store.recheck.DUE_POLL`
seconds, asleep (:func:`geminibot.crawl.continuous.any_due`) or running (the crawler's
``poll_due``), and fetches it before its host's other queued URLs (:func:`put_first`),
otherwise as any queued URL: through the address guard, the capsule's policy (a host not
asked yet: its policy files first) and its pace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from geminibot.store.database import Database, open_database
from geminibot.store.errors import DatabaseError
from geminibot.store.recheck import put_first, recheck
from geminibot.store.traps import FrontierLimits
from geminibot.urls import host_key, normalise


@contextmanager
def _crawl_store(database: Database, clock: Callable[[], float]) -> Iterator[Any]:
    """The crawl store of ``database`` for one submission: an SQLite file is written over
    its own connection, each write committed (it does not take the crawl's lock)."""
    if database.sqlite is None:
        with database.crawl_store(clock, FrontierLimits()) as store:
            yield store
        return
    from geminibot.store.crawlstore import SqliteStore

    yield SqliteStore(database.sqlite, clock, FrontierLimits())


def submit(db: str, url: str, clock: Callable[[], float]) -> str:
    """Fetch ``url`` soon, in the crawl database ``db`` (an SQLite file, written beside
    the crawl that holds it, or a ``postgresql://`` URL): what became of it, ``queued``
    (new), ``due now`` (known, finished), ``already queued`` (or being fetched), or
    ``trapped: REASON`` (a trap bound keeps it out); raises
    :class:`~geminibot.store.errors.DatabaseError`."""
    url = normalise(url)
    with open_database(db) as database:
        try:
            done = recheck(database, url, host_key(url), is_url=True, now=clock())
            if done.due:
                return "due now"
            if done.waiting:
                return "already queued"
            with _crawl_store(database, clock) as store:
                if done.kept_out:
                    known = store.state_of(url)
                    return f"trapped: {known[1] if known else 'a trap bound'}"
                what = str(store.seed([url])[url])
            if what == "queued":
                with database.transaction():
                    put_first(database, url, clock())
            return what
        except database.errors as exc:  # a database we may not write, locked too long
            raise DatabaseError(f"{database.name}: cannot write: {exc}") from None
