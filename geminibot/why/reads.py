"""The faces' ``/check`` reads of the crawl database, off the event loop.

Each read runs on a worker thread with a connection of its own (:class:`geminibot.index.
reads.Reads`: never the connection the face answers other requests with), at most
:data:`CHECK_READS` at once. A ``/check`` that finds them all taken waits its turn for up
to :data:`CHECK_WAIT` seconds, then :class:`~geminibot.store.reads.ReadsBusy` (the faces
answer ``44`` or ``503``). So one slow read never stalls the other requests.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from geminibot.store.database import Database
from geminibot.store.reads import Opener, Reads, opened
from geminibot.why import check, parse_target
from geminibot.why.explain import Answer
from geminibot.why.host import HostAnswer

#: ``/check`` reads of the crawl database at once (each on a worker thread).
CHECK_READS = 2
#: Seconds a ``/check`` waits for a read to end before it is answered "busy".
CHECK_WAIT = 5.0

Read = Callable[[Database, str, float], Answer | HostAnswer]


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
        self.reads = Reads(open_db, limit=limit, wait=wait)
        self.read = read

    @classmethod
    def of(cls, db: str, **options: Any) -> CheckReads:
        """The reads of the crawl database ``db`` (see :func:`~geminibot.store.reads.
        opened`)."""
        return cls(partial(opened, db), **options)

    async def answer(self, text: str, now: float) -> Answer | HostAnswer:
        """What :func:`geminibot.why.check` answers for ``text`` at ``now``; raises its
        :class:`~geminibot.why.BadTarget`, and
        :class:`~geminibot.store.reads.ReadsBusy`."""
        parse_target(text)  # a bad target is told at once, without a read
        return await self.reads.run(lambda conn: self.read(conn, text, now))
