"""A URL submitted to be fetched soon (the search capsule's ``/submit``, Antenna-style): put
in the frontier as the crawl puts a seed, or queued again now if the crawl knows it.

A new URL goes through the frontier's own path (:meth:`CrawlStore.seed`: normalised,
the trap bounds applied, its host's row made); a known one finished (``done``,
``refused``, ``failed``, ``gone``) is queued again at once, its revisit time cleared. The
crawl then fetches it as any queued URL: through the address guard, the capsule's policy
and its pace. (A stand-in for the store's ``recheck`` routine being written beside it;
``/submit`` takes that one when it lands.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from geminibot.store.database import open_database
from geminibot.store.traps import FrontierLimits


@contextmanager
def crawl_store(db: str, clock: Callable[[], float]) -> Iterator[Any]:
    """The crawl store of ``db`` (an SQLite file, or a ``postgresql://`` URL) for one
    submission, closed at the end; raises :class:`~geminibot.store.errors.DatabaseError`.
    An SQLite file is written over a connection of its own, each write committed, beside
    the crawl that holds it (it does not take the crawl's lock)."""
    with open_database(db) as database:
        if database.sqlite is None:
            with database.crawl_store(clock, FrontierLimits()) as store:
                yield store
            return
        from geminibot.store.crawlstore import SqliteStore

        yield SqliteStore(database.sqlite, clock, FrontierLimits())


def submit(db: str, url: str, clock: Callable[[], float]) -> str:
    """Queue ``url`` (normalised) in the crawl database ``db``: what became of it,
    ``queued`` (new), ``queued again``, ``already queued`` (or being fetched), or
    ``trapped: REASON`` (a trap bound of the frontier refused it)."""
    with crawl_store(db, clock) as store:
        known = store.state_of(url)
        if known is None:
            return str(store.seed([url])[url])
        if known[0] in ("queued", "leased"):
            return "already queued"
        if known[0] == "trapped":
            return f"trapped: {known[1]}"
        return "queued again" if store.requeue(url) else "already queued"
