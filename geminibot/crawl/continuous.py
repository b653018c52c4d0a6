"""A crawl that keeps going (``geminibot crawl --forever``): runs, sleeps until work is
due, runs again, until SIGTERM or SIGINT.

Each run is an ordinary crawl (:class:`~geminibot.crawl.crawler.Crawler`): it queues the
URLs whose revisit time has come, crawls until its frontier is empty, and ends. Then
:func:`next_due` reads from the store when the next URL is due: a page's revisit interval,
a failed request's retry back-off, a refusal asked again (``urls.next_visit``), and for
URLs still queued (their host skipped for now) the host's back-off (``hosts.not_before``)
or its cached policy files' expiry (``robots.expires_at``, a robots.txt's 24 hours; a
visit window or an unreachable host is looked at again after :data:`QUEUED_RECHECK`).
The loop sleeps until then, at least :data:`MIN_PAUSE` and at most :data:`MAX_SLEEP`,
and looks every :data:`~geminibot.store.recheck.DUE_POLL` seconds whether work has come
meanwhile (:func:`any_due`): a URL made due (by ``geminibot recheck`` or the search
capsule's ``/submit``, or by a link to a page not found), or a URL new to the store
queued since the run's last look (a ``/submit`` of a URL never met, another process's
links): it then runs at once. A run looks as often (the crawler's ``poll_due``): it
queues the URLs come due and hands the scheduler their hosts and those of the URLs new
to the store, paced and asked for their policy like any. So a recheck or a submission is
taken within ``DUE_POLL`` whether the crawl runs, sleeps or is between the two.

:class:`Stopper` stops it: the run in progress (its requests in flight go back to the
queue, as Ctrl-C does a single crawl) or the sleep. Every stop resumes: the store is the
state, the next start runs at once.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from geminibot.crawl.clock import TrioWallClock
from geminibot.store.recheck import DUE_POLL

if TYPE_CHECKING:
    from geminibot.store.database import Database

#: Shortest pause between two runs (seconds): a store whose next work is due at once
#: (a clock gone backwards, a URL whose host cannot be asked) does not spin.
MIN_PAUSE = 1.0
#: Longest sleep between two runs (seconds).
MAX_SLEEP = 3600.0
#: When URLs are still queued after a run (their host skipped for now: a visit window,
#: no answer; or a limit met), how soon they are tried again at the latest (seconds).
QUEUED_RECHECK = 300.0


def next_due(database: Database, now: float) -> float | None:
    """When the store's next work is due (``None``: nothing ever will be, until new
    seeds come)."""
    from geminibot.store import statements as q

    row = database.run(q.NEXT_DUE, now=now).fetchone()
    due = None if row is None or row[0] is None else float(row[0])
    if database.run(q.ANY_QUEUED).fetchone()[0]:
        recheck = now + QUEUED_RECHECK
        due = recheck if due is None else min(due, recheck)
    return due


def any_due(database: Database, now: float, newest: int | None = None) -> bool:
    """Whether a finished URL is due at ``now``, or (``newest``: the newest URL id the
    last run looked at, :attr:`~geminibot.crawl.progress.Progress.newest_url`) a URL new
    to the store was queued since (a ``/submit``)."""
    from geminibot.store import statements as q

    return bool(database.run(q.ANY_DUE, now=now, newest=newest).fetchone()[0])


def pause(now: float, due: float | None) -> float:
    """Seconds to sleep before the next run: until ``due``, within
    [:data:`MIN_PAUSE`, :data:`MAX_SLEEP`]."""
    wait = MAX_SLEEP if due is None else due - now
    return min(MAX_SLEEP, max(MIN_PAUSE, wait))


class Stopper:
    """Stops a crawl, whether it runs or sleeps: :meth:`stop` (SIGTERM and SIGINT call it
    in :meth:`watch_signals`) stops the crawler running now, or ends the sleep."""

    def __init__(self) -> None:
        self.stopped = False
        self._stop_running: Callable[[], None] | None = None
        self._sleep: trio.CancelScope | None = None

    def running(self, stop: Callable[[], None] | None) -> None:
        """The run in progress is stopped by ``stop`` (None: no run now)."""
        self._stop_running = stop
        if stop is not None and self.stopped:
            stop()

    def stop(self) -> None:
        self.stopped = True
        if self._stop_running is not None:
            self._stop_running()
        if self._sleep is not None:
            self._sleep.cancel()

    async def watch_signals(self) -> None:
        """Call :meth:`stop` at the first SIGTERM or SIGINT."""
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                self.stop()
                return

    async def sleep_unless(
        self, seconds: float, woken: Callable[[], bool], every: float = DUE_POLL
    ) -> None:
        """Sleep ``seconds``, or until :meth:`stop`, or until ``woken()`` (asked every
        ``every`` seconds) says there is work."""
        clock = trio.current_time
        end = clock() + seconds
        while not self.stopped and clock() < end:
            await self.sleep(min(every, end - clock()))
            if not self.stopped and clock() < end and woken():
                return

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or until :meth:`stop`."""
        if self.stopped:
            return
        with trio.CancelScope() as scope:
            self._sleep = scope
            await trio.sleep(seconds)
        self._sleep = None


async def keep_going(
    run_once: Callable[[Callable[[], float]], Any],
    due: Callable[[float], float | None],
    stopper: Stopper,
    on_sleep: Callable[[float, float | None], None] | None = None,
    woken: Callable[[float], Callable[[float], bool]] | None = None,
) -> int:
    """Run ``run_once(wall_clock)`` (one crawl, its clock the loop's), then sleep until
    ``due(now)``, again and again until ``stopper`` stops it; returns the runs made.
    ``woken(now)``, called as a sleep begins, gives the test asked every
    :data:`~geminibot.store.recheck.DUE_POLL` seconds of it (``test(now)``): it ends the
    sleep early when it says work is due (:func:`any_due`).

    The wall clock is the time at the start advanced by trio's clock (under trio's mock
    clock a test sleeps through days at once); ``on_sleep(seconds, due)`` is told of each
    sleep."""
    clock = TrioWallClock()
    clock.start()
    runs = 0
    while not stopper.stopped:
        await run_once(clock.now)
        runs += 1
        if stopper.stopped:
            break
        now = clock.now()
        when = due(now)
        seconds = pause(now, when)
        if on_sleep is not None:
            on_sleep(seconds, when)
        if woken is None:
            await stopper.sleep(seconds)
        else:
            await stopper.sleep_unless(seconds, _asking(woken(now), clock.now))
    return runs


def _asking(test: Callable[[float], bool], clock: Callable[[], float]) -> Callable[[], bool]:
    """``test`` asked at ``clock``'s time."""
    return lambda: test(clock())
