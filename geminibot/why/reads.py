"""The faces' ``/check``: its reads of the crawl database off the event loop, its work
in a worker process, its answers kept for a while.

A ``/check`` has two parts, each bounded on its own so that a flood of them never takes
what the faces' other requests (a search) need:

- the read (:func:`geminibot.why.read_records`) runs on a worker thread with a connection
  of its own (:class:`geminibot.store.reads.Reads`: never the connection the face answers
  other requests with), at most :data:`CHECK_READS` at once;
- the explanation (:func:`geminibot.why.explain`: parsing and linting the host's policy
  files, deciding for each virtual agent, up to a second of CPU for a 500 KiB robots.txt)
  and, for a host, the capsule's census (:func:`geminibot.census.host.host_census`, as
  ``geminibot census --host`` takes it: its counts read on a connection the worker opens
  for it, its robots.txt linted) run in a separate worker process at a lower priority
  (:data:`CHECK_NICENESS`), at most :data:`CHECK_WORKERS` at once, so that they hold
  neither the face's interpreter (its GIL) nor more than one core.

A ``/check`` that finds either part's slots all taken waits its turn for up to
:data:`CHECK_WAIT` seconds, then :class:`CheckBusy` (the faces answer ``44`` or ``503``).
An answer is kept :data:`CHECK_CACHE_SECONDS` for the same URL or host and the same
fetch of its policy files (at most :data:`CHECK_CACHE_ENTRIES` answers); the same
question asked while it is being answered waits for that answer instead of making
another. The worker process keeps the last parsed policies too
(:data:`~geminibot.why.explain.POLICIES_KEPT`), so other URLs of a host just explained
cost little.
"""

from __future__ import annotations

import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import replace
from functools import partial
from typing import Any

import trio
import trio_parallel

from geminibot.census.model import Census
from geminibot.cliutil import CommandError
from geminibot.store.database import Database, open_database
from geminibot.store.reads import Opener, Reads, ReadsBusy, opened
from geminibot.why import explain, parse_target, read_records
from geminibot.why.explain import Answer
from geminibot.why.host import HostAnswer
from geminibot.why.records import HostRecords, UrlRecords

#: ``/check`` reads of the crawl database at once (each on a worker thread).
CHECK_READS = 2
#: ``/check`` explanations computed at once (each in a worker process).
CHECK_WORKERS = 1
#: How much lower the worker process's scheduling priority is (``nice``).
CHECK_NICENESS = 10
#: Seconds a ``/check`` waits for a read or a worker before it is answered "busy".
CHECK_WAIT = 5.0
#: Seconds an answer is kept for the same question and the same fetch of the files.
CHECK_CACHE_SECONDS = 60.0
#: Answers kept at most (the oldest is dropped first).
CHECK_CACHE_ENTRIES = 256

Records = UrlRecords | HostRecords
Read = Callable[[Database, str], Records]
Explain = Callable[[Records, float], Answer | HostAnswer]

_NO_LIMIT = trio.CapacityLimiter(math.inf)  # CheckReads bounds the workers itself


class CheckBusy(ReadsBusy):
    """Every ``/check`` slot stayed taken for the wait allowed: ask again after
    ``retry_after`` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(retry_after)
        self.args = (f"too many checks at once: try again in {retry_after} s",)


def capsule_census(db: str, host: str, now: float) -> Census | None:
    """The census of the capsule ``host`` at ``now`` (``geminibot census --host``), read
    from the crawl database ``db`` on a connection of its own; None when the crawl knows
    no such host."""
    # The census's reads and policy lint: imported by the first host census (start fast).
    from geminibot.census.host import host_census

    with open_database(db) as database:
        try:
            return host_census(database, host, now)
        except CommandError:  # (census --host's "the crawl knows no host ...")
            return None


def explain_in_worker(
    explain: Explain, db: str | None, records: Records, now: float
) -> Answer | HostAnswer:
    """A ``/check``'s work in its worker process, whose priority it lowers first:
    ``explain(records, now)``, and for a host the capsule's census from ``db`` (None:
    none)."""
    if os.getpriority(os.PRIO_PROCESS, 0) < CHECK_NICENESS:
        os.setpriority(os.PRIO_PROCESS, 0, CHECK_NICENESS)
    answer = explain(records, now)
    if db is None or not isinstance(answer, HostAnswer):
        return answer
    return replace(answer, census=capsule_census(db, answer.host, now))


def cache_key(records: Records) -> Hashable:
    """What an answer is kept for: the URL or host, and the fetch of each policy file."""
    files = records.files + (records.web_files if isinstance(records, HostRecords) else ())
    fetches = tuple((f.name, f.fetched_at, f.outcome, len(f.body or b"")) for f in files)
    target = records.url if isinstance(records, UrlRecords) else records.host
    return (type(records).__name__, target, fetches)


class CheckReads:
    """The ``/check`` answers of a crawl database: :meth:`answer` reads on a worker thread
    with a connection from ``open_db`` (``limit`` reads at once) and explains in a worker
    process (``workers`` at once), each part waiting at most ``wait`` seconds for its turn.
    ``read`` is what runs on the connection (:func:`geminibot.why.read_records`);
    ``explain`` what runs in the worker process (it must be a module's function), which
    adds a host's census from ``census_db`` (the database's path or URL; None: no census).
    """

    def __init__(
        self,
        open_db: Opener,
        *,
        limit: int = CHECK_READS,
        wait: float = CHECK_WAIT,
        workers: int = CHECK_WORKERS,
        read: Read = read_records,
        explain: Explain = explain,
        census_db: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reads = Reads(open_db, limit=limit, wait=wait)
        self.read = read
        self.explain = explain
        self.census_db = census_db
        self.workers = trio.CapacityLimiter(workers)
        self.wait = wait
        self.clock = clock
        self._answers: OrderedDict[Hashable, tuple[float, Answer | HostAnswer]] = OrderedDict()
        self._pending: dict[Hashable, trio.Event] = {}

    @classmethod
    def of(cls, db: str, **options: Any) -> CheckReads:
        """The reads of the crawl database ``db`` (see :func:`~geminibot.store.reads.
        opened`), a host's census with them."""
        return cls(partial(opened, db), census_db=db, **options)

    async def answer(self, text: str, now: float) -> Answer | HostAnswer:
        """What :func:`geminibot.why.check` answers for ``text`` at ``now``; raises its
        :class:`~geminibot.why.BadTarget`, and :class:`~geminibot.store.reads.ReadsBusy`
        (:class:`CheckBusy` when the workers are)."""
        parse_target(text)  # a bad target is told at once, without a read
        records = await self.reads.run(lambda conn: self.read(conn, text))
        key = cache_key(records)
        deadline = trio.current_time() + self.wait
        while True:
            kept = self._kept(key)
            if kept is not None:
                return kept
            pending = self._pending.get(key)
            if pending is None:
                break
            with trio.move_on_at(deadline):
                await pending.wait()
            if trio.current_time() >= deadline and self._kept(key) is None:
                raise CheckBusy(max(1, math.ceil(self.wait)))
        with trio.move_on_at(deadline) as waited:
            await self.workers.acquire()
        if waited.cancelled_caught:
            raise CheckBusy(max(1, math.ceil(self.wait)))
        done = self._pending[key] = trio.Event()
        try:
            answer: Answer | HostAnswer = await trio_parallel.run_sync(
                explain_in_worker,
                self.explain,
                self.census_db,
                records,
                now,
                kill_on_cancel=True,
                limiter=_NO_LIMIT,
            )
            self._keep(key, answer)
            return answer
        finally:
            del self._pending[key]
            done.set()
            self.workers.release()

    def _kept(self, key: Hashable) -> Answer | HostAnswer | None:
        kept = self._answers.get(key)
        if kept is None:
            return None
        if self.clock() - kept[0] >= CHECK_CACHE_SECONDS:
            del self._answers[key]
            return None
        return kept[1]

    def _keep(self, key: Hashable, answer: Answer | HostAnswer) -> None:
        self._answers[key] = (self.clock(), answer)
        self._answers.move_to_end(key)
        while len(self._answers) > CHECK_CACHE_ENTRIES:
            self._answers.popitem(last=False)
