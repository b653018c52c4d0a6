"""The faces' ``/check`` reads of the crawl database, off the event loop.

Each read runs on a worker thread with a connection of its own to the database (opened
for it and closed after: one ``/check`` never holds the connection the face answers other
requests with), at most :data:`CHECK_READS` at once. A ``/check`` that finds them all
taken waits its turn for up to :data:`CHECK_WAIT` seconds, then :class:`CheckBusy` (the
faces answer ``44`` or ``503``). So one slow read never stalls the other requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any

import trio

from geminibot.why import check, parse_target
from geminibot.why.explain import Answer
from geminibot.why.host import HostAnswer

#: ``/check`` reads of the crawl database at once (each on a worker thread).
CHECK_READS = 2
#: Seconds a ``/check`` waits for a read to end before it is answered "busy".
CHECK_WAIT = 5.0

Opener = Callable[[], AbstractContextManager[Any]]
Read = Callable[[Any, str, float], Answer | HostAnswer]


class CheckBusy(Exception):
    """Every read slot stayed taken for :data:`CHECK_WAIT` seconds: ask again after
    ``retry_after`` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the crawl database is busy: try again in {retry_after} s")
        self.retry_after = retry_after


@contextmanager
def opened(db: str) -> Iterator[Any]:
    """A connection of its own to the crawl database ``db`` (an SQLite file or a
    ``postgresql://`` URL), closed after."""
    from geminibot.index.search_cli import reading

    with reading(db) as (conn, _):
        yield conn


class CheckReads:
    """The ``/check`` answers of a crawl database: :meth:`answer` reads on a worker thread
    with a connection from ``open_db``, ``limit`` reads at once, each waiting at most
    ``wait`` seconds for its turn. ``read`` is what runs on the connection
    (:func:`geminibot.why.check`)."""

    def __init__(
        self,
        open_db: Opener,
        *,
        limit: int = CHECK_READS,
        wait: float = CHECK_WAIT,
        read: Read = check,
    ) -> None:
        self.open_db = open_db
        self.limiter = trio.CapacityLimiter(limit)
        self.wait = wait
        self.read = read

    @classmethod
    def of(cls, db: str, **options: Any) -> CheckReads:
        """The reads of the crawl database ``db`` (see :func:`opened`)."""
        return cls(partial(opened, db), **options)

    async def answer(self, text: str, now: float) -> Answer | HostAnswer:
        """What :func:`geminibot.why.check` answers for ``text`` at ``now``; raises its
        :class:`~geminibot.why.BadTarget`, and :class:`CheckBusy`."""
        parse_target(text)  # a bad target is told at once, without a read
        with trio.move_on_after(self.wait) as waited:
            await self.limiter.acquire()
        if waited.cancelled_caught:
            raise CheckBusy(max(1, math.ceil(self.wait)))
        try:
            return await trio.to_thread.run_sync(self._read, text, now)
        finally:
            self.limiter.release()

    def _read(self, text: str, now: float) -> Answer | HostAnswer:
        with self.open_db() as conn:
            return self.read(conn, text, now)
