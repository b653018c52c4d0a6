"""Reads of a crawl database off the event loop, for the servers that answer from it (the
search capsule's pages, the ``/check`` of both faces).

:class:`Reads` runs each read on a worker thread with a connection of its own pool, at
most ``limit`` reads at once. A read that finds every slot taken waits its turn for at
most ``wait`` seconds, then :class:`ReadsBusy` (the servers answer ``44`` or ``503``
with the seconds to wait). So a slow read holds one slot and one connection, never the
event loop: the server goes on answering, and never holds more than ``limit``
connections. A connection is opened on first need and kept for the next read; one whose
read failed is closed (it may be broken), and :meth:`Reads.close` closes the rest.

:class:`Periodic` keeps a costly read's result (a page of figures) for a while, read once
for all who ask meanwhile.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from functools import partial
from typing import Generic, TypeVar

import trio

from geminibot.store.database import Database, open_database

T = TypeVar("T")
#: Opens the database on a connection of its own (a context manager that closes it).
Opener = Callable[[], AbstractContextManager[Database]]


class ReadsBusy(Exception):
    """Every read slot stayed taken for the wait allowed: ask again after
    ``retry_after`` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the crawl database is busy: try again in {retry_after} s")
        self.retry_after = retry_after


@contextmanager
def opened(db: str) -> Iterator[Database]:
    """The crawl database ``db`` (an SQLite file or a ``postgresql://`` URL) opened to
    read, on a connection of its own that worker threads may use one after another;
    closed after."""
    with open_database(db, any_thread=True) as database:
        yield database


class Reads:
    """Reads of one database on worker threads: :meth:`run` at most ``limit`` at once,
    each waiting at most ``wait`` seconds for its turn; connections from ``open_db``."""

    def __init__(self, open_db: Opener, *, limit: int, wait: float) -> None:
        self.open_db = open_db
        self.limiter = trio.CapacityLimiter(limit)
        self.wait = wait
        self._idle: list[tuple[Database, ExitStack]] = []  # (connection, what closes it)
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def of(cls, db: str, *, limit: int, wait: float) -> Reads:
        """The reads of the crawl database ``db`` (see :func:`opened`)."""
        return cls(partial(opened, db), limit=limit, wait=wait)

    async def run(self, read: Callable[[Database], T]) -> T:
        """``read(database)`` on a worker thread; raises what it raises, and
        :class:`ReadsBusy` when no slot was free within the wait."""
        with trio.move_on_after(self.wait) as waited:
            await self.limiter.acquire()
        if waited.cancelled_caught:
            raise ReadsBusy(max(1, math.ceil(self.wait)))
        try:
            return await trio.to_thread.run_sync(self._on_a_connection, read)
        finally:
            self.limiter.release()

    def _on_a_connection(self, read: Callable[[Database], T]) -> T:
        with self._lock:
            held = self._idle.pop() if self._idle else None
        if held is None:
            stack = ExitStack()
            held = (stack.enter_context(self.open_db()), stack)
        try:
            result = read(held[0])
        except BaseException:
            held[1].close()
            raise
        with self._lock:
            if not self._closed:
                self._idle.append(held)
                return result
        held[1].close()
        return result

    def close(self) -> None:
        """Close the idle connections, and each running read's once it ends."""
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for _, stack in idle:
            stack.close()


class Periodic(Generic[T]):
    """A result read at most once every ``seconds`` (on ``clock``), and once for all the
    requests that come while it is read; a result ``keep`` refuses (a failed read's
    answer), or an exception, is not kept."""

    def __init__(
        self, seconds: float, clock: Callable[[], float], keep: Callable[[T], bool]
    ) -> None:
        self.seconds = seconds
        self.clock = clock
        self.keep = keep
        self._kept: tuple[float, T] | None = None  # (read at, result)
        self._reading: trio.Event | None = None  # being read now: set when done

    async def get(self, read: Callable[[], Awaitable[T]]) -> T:
        if self._reading is not None:
            await self._reading.wait()
        now = self.clock()
        if self._kept is not None and now - self._kept[0] < self.seconds:
            return self._kept[1]
        self._reading = reading = trio.Event()
        try:
            answer = await read()
            if self.keep(answer):
                self._kept = (now, answer)
            return answer
        finally:
            self._reading = None
            reading.set()
