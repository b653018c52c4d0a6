"""Which host may be crawled, and when: the ready-host set and the per-host schedule.

The :class:`Scheduler` keeps, in memory, the hosts that have queued URLs, learned from the
store once when the crawl starts and kept up to date from what the crawl does (new links
queue work for their hosts; a host whose queue is found empty leaves the set), and the
queue of those that are ready for a worker (oldest work first): a host enters it when it
gets work and had none, so a worker ending costs no scan of the queue or of the hosts. Per host it
applies :class:`~geminibot.crawl.politeness.Politeness` (one request at a time, the site
policy's delay or the rule of thumb, the 44/429/503 back-off, visit windows, absurd waits
skip the host) and waits on the injected clock for the host's turn.

Hosts that share an address (several capsules on one server, several names for one
machine: the crawler passes ``address:port`` as resolved, --connect-to applied) are also
paced as one: one request at a time to the address (:meth:`Scheduler.address_turn`, in
the order asked), and each host's delay counted from the address's last request as well
as from the host's own. A server that limits its rate per client address
then sees one polite client, not one per virtual host. The address's state lives in
memory for the run (the per-host state is what the store keeps).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Protocol

import trio

from geminibot.crawl.politeness import HostPace, Politeness
from geminibot.crawl.store import HostState


class Clock(Protocol):
    """The crawl's time: wall-clock seconds, and a way to wait until one of them."""

    def start(self) -> None:
        """The crawl starts (inside trio)."""
        ...

    def now(self) -> float: ...
    async def sleep_until(self, when: float) -> None: ...


class TrioWallClock:
    """Wall-clock time at the start, advanced by trio's clock: the politeness state kept
    in the database stays meaningful across restarts, and under trio's mock clock tests
    do not sleep."""

    def __init__(self, wall_clock: Callable[[], float] = time.time) -> None:
        self._wall0 = wall_clock()
        self._trio0: float | None = None

    def start(self) -> None:
        self._trio0 = trio.current_time()

    def now(self) -> float:
        if self._trio0 is None:
            return self._wall0
        return self._wall0 + (trio.current_time() - self._trio0)

    async def sleep_until(self, when: float) -> None:
        await trio.sleep(max(0.0, when - self.now()))


class Scheduler:
    def __init__(self, clock: Clock, *, test_range: bool = False, min_delay: float = 0.0) -> None:
        self.clock = clock
        self.politeness = Politeness(clock.now, test_range=test_range, min_delay=min_delay)
        self._work: set[str] = set()  # hosts with queued URLs
        self._ready: deque[str] = deque()  # ... that have no worker yet, oldest work first
        self._opens: dict[str, float] = {}  # host -> when its visit window opens
        self._waiting: dict[str, float] = {}  # host -> when its worker's turn comes
        self._address: dict[str, str] = {}  # host -> address:port
        self._address_locks: dict[str, trio.Lock] = {}

    # -- the ready-host set --

    def restore(self, states: dict[str, HostState], with_work: Iterable[str]) -> None:
        """Seed the schedule from the store (after a restart)."""
        for host, s in states.items():
            self.politeness.restore(
                host,
                last_end=s.last_end,
                last_duration=s.last_duration,
                not_before=s.not_before,
                slow_downs=s.slow_downs,
            )
        self.add_work(with_work)

    def add_work(self, hosts: Iterable[str]) -> None:
        """``hosts`` have queued URLs; those that had none become ready."""
        for host in hosts:
            if host not in self._work:
                self._work.add(host)
                self._ready.append(host)

    def drop_work(self, host: str) -> None:
        """``host``'s queue was found empty (its worker ends)."""
        self._work.discard(host)

    def hosts_with_work(self) -> int:
        """How many hosts have queued URLs (as far as the crawl knows)."""
        return len(self._work)

    def next_turn(self) -> tuple[str, float] | None:
        """The host whose worker waits for the soonest turn, and when it comes."""
        if not self._waiting:
            return None
        host = min(self._waiting, key=self._waiting.__getitem__)
        return host, self._waiting[host]

    def take_ready(self, limit: int | None = None) -> list[str]:
        """The hosts that got work since the last call, oldest work first; at most
        ``limit`` of them (the others stay ready for a later call)."""
        if limit is None or limit >= len(self._ready):
            ready = list(self._ready)
            self._ready.clear()
            return ready
        return [self._ready.popleft() for _ in range(max(limit, 0))]

    # -- addresses --

    def set_address(self, host: str, address: str) -> None:
        """``host``'s requests go to ``address`` (``addr:port``)."""
        self._address[host] = address
        self.politeness.set_group(host, address)

    @asynccontextmanager
    async def address_turn(self, host: str) -> AsyncIterator[None]:
        """Hold ``host``'s address for one request (FIFO among the hosts waiting)."""
        address = self._address.get(host, host)
        lock = self._address_locks.setdefault(address, trio.Lock())
        async with lock:
            yield

    # -- one host's schedule --

    def set_pace(self, host: str, delay: float | None) -> None:
        """The site policy's delay (None: the rule of thumb), and the visit window that
        :meth:`wait_for_window` announced, if any."""
        opens = self._opens.pop(host, None)
        window = None if opens is None else (lambda t: max(t, opens))
        self.politeness.set_pace(host, HostPace(delay=delay, window_opens=window))

    def wait_for_window(self, host: str, opens: float) -> bool:
        """The next request to ``host`` waits for a visit window opening at ``opens``;
        False when that is too far away (the host is then skipped for now)."""
        self._opens[host] = opens
        return self.politeness.ready_at(host) is not None

    async def wait_turn(self, host: str) -> bool:
        """Sleep until ``host``'s next request may start; False if it is skipped for now."""
        try:
            while True:
                at = self.politeness.ready_at(host)
                if at is None:
                    return False
                if at <= self.clock.now():
                    return True
                self._waiting[host] = at
                await self.clock.sleep_until(at)
        finally:
            self._waiting.pop(host, None)

    def turn_now(self, host: str) -> bool | None:
        """Whether ``host``'s next request may start now; None if it is skipped for now."""
        at = self.politeness.ready_at(host)
        return None if at is None else at <= self.clock.now()

    def start(self, host: str) -> None:
        self.politeness.start(host)

    def finish(
        self, host: str, duration: float, status: int | None, meta: str, *, slow_down: bool
    ) -> HostState:
        """The request ended; returns the host's state to persist."""
        self.politeness.finish(host, duration, status, meta, slow_down=slow_down)
        return self.state(host)

    def state(self, host: str) -> HostState:
        return HostState(*self.politeness.state(host))

    def last_duration(self, host: str) -> float:
        return self.politeness.state(host)[1]

    def skipped(self, host: str) -> str | None:
        return self.politeness.skipped(host)
