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
paced as one: one request at a time to the address (:meth:`Scheduler.address_turn`:
costly hosts first, each costly request followed by another host's when one waits, each
kind in the order asked), and each host's delay counted from the address's last request
as well as from the host's own. A server that limits its rate per client address then
sees one polite client, not one per virtual host. The address's state lives in memory
for the run (the per-host state is what the store keeps).

A worker does not sleep through a host's long waits: a host whose next turn is more than
a short bound away (the crawler's ``HOLD_TURN``; :meth:`Scheduler.wait_turn` raises
:class:`TurnLater`), or that has had its share of pages in a row (``TURN_PAGES``), is
handed back (:meth:`Scheduler.hand_back`) to a heap keyed by the time its turn comes;
:meth:`Scheduler.take_ready` moves the hosts whose turn has come from the heap to the back
of the ready queue, and the worker takes another ready host. A waiting host thus costs a
heap entry, not a task, and hosts with slow paces (a delay, a 44's back-off, a visit
window) or with many pages take turns with the others instead of holding the workers.
Hosts whose requests cost much polite wall time (:data:`COSTLY_REQUEST`: slow answers,
long delays or back-offs) go ahead of the others, in the ready queue and for their
address: they need wall time rather than CPU, and left to wait behind the fast hosts they
were all that was left at the end of a crawl.
"""

from __future__ import annotations

import heapq
import itertools
import math
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


class TurnLater(Exception):
    """The host's next turn is further away than the worker holds a host: hand it back
    (:meth:`Scheduler.hand_back`) with ``at``, the time its turn comes."""

    def __init__(self, host: str, at: float) -> None:
        super().__init__(host, at)
        self.host = host
        self.at = at


#: A host whose requests cost at least this much polite wall time each (seconds: its last
#: request's duration and the wait before its next, its delay or its last 44's back-off;
#: :meth:`~geminibot.crawl.politeness.Politeness.request_cost`) goes ahead of the other
#: hosts when its turn comes back (the ready queue) and when it waits for its address.
#: Such a host needs wall time, not CPU: a host allowed two requests a second or fewer
#: (the synthetic space's slow hosts answer in 0.5 s, its rate-limited ones allow one a
#: second) that waits its place behind hundreds of fast hosts gets one every minute and
#: is all that is left at the end of the crawl (issue 15). Fast hosts' requests, tens of
#: ms even on a loaded machine, stay far below it; with the rule of thumb's 10 s delay
#: (no test range) every host is costly, and they are served in order as before.
COSTLY_REQUEST = 0.5


class _AddressTurn:
    """One address, one request at a time; the costly hosts waiting for it
    (:data:`COSTLY_REQUEST`) go first, but a costly request is followed by another host's
    when one waits; each class in the order asked.

    The crawler's addresses are its machines, its hosts the jobs, each a chain of one
    request at a time: an address is busy for the sum of its requests whatever their
    order, but a request that is slow, or that follows a long wait of its host's own (a
    delay, a 44's back-off), costs wall time and next to no CPU, while a fast host's
    request costs CPU that the other addresses want too. Served in the order asked, a
    host that may send one request a second and waits behind twenty fast hosts' requests
    sends one every few seconds, and such hosts were all that was left at the end of a
    crawl (issue 15: the last tenth of the pages at an eighth of the rate). Served first,
    they spend their polite time while the other hosts keep the CPU busy (longest
    processing time first); served strictly first, two slow hosts answering back to back
    held their address between them and its other hosts started minutes late, hence the
    alternation. Never faster: the host's own turn and the address's one request at a
    time still hold."""

    def __init__(self) -> None:
        self.held = False
        self.costly_held = False  # the request holding it is a costly host's
        self.waiting: tuple[deque[trio.Event], deque[trio.Event]] = (deque(), deque())

    async def acquire(self, costly: bool) -> None:
        if not self.held:
            await trio.lowlevel.checkpoint()
            if not self.held:
                self.held, self.costly_held = True, costly
                return
        line = self.waiting[0 if costly else 1]
        event = trio.Event()
        line.append(event)
        try:
            await event.wait()
        except BaseException:
            if event.is_set():  # the turn was passed to us as we were cancelled: pass it on
                self.release()
            else:
                line.remove(event)
            raise

    def release(self) -> None:
        """Pass the address to the next waiter (it stays held, now by a request of the
        waiter's class), or free it."""
        costly, others = self.waiting
        if others and (self.costly_held or not costly):
            others.popleft().set()
            self.costly_held = False
        elif costly:
            costly.popleft().set()
            self.costly_held = True
        else:
            self.held = False


class Scheduler:
    def __init__(self, clock: Clock, *, test_range: bool = False, min_delay: float = 0.0) -> None:
        self.clock = clock
        self.politeness = Politeness(clock.now, test_range=test_range, min_delay=min_delay)
        self._work: set[str] = set()  # hosts with queued URLs
        self._ready: deque[str] = deque()  # ... that have no worker yet, oldest work first
        self._ready_costly: deque[str] = deque()  # ... costly ones, ahead (COSTLY_REQUEST)
        self._opens: dict[str, float] = {}  # host -> when its visit window opens
        self._waiting: dict[str, float] = {}  # host -> when its worker's turn comes
        self._address: dict[str, str] = {}  # host -> address:port
        self._address_turns: dict[str, _AddressTurn] = {}
        # hosts handed back until their turn: (when, order, host); an entry is current
        # while _turn_of[host] is its order (a later hand-back or a take supersedes it)
        self._turns: list[tuple[float, int, str]] = []
        self._turn_of: dict[str, int] = {}
        self._order = itertools.count()

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
        """The host waiting for the soonest turn (its worker's, or handed back), and when
        it comes."""
        turns = list(self._waiting.items())
        handed = self._first_handed_back()
        if handed is not None:
            turns.append((handed[2], handed[0]))
        if not turns:
            return None
        return min(turns, key=lambda turn: turn[1])

    def hand_back(self, host: str, at: float) -> None:
        """``host``'s worker lets it go until ``at``, its next turn: it then comes back
        to the ready queue (:meth:`take_ready`), behind the hosts already there (a costly
        host: behind the costly ones, ahead of the others; see :data:`COSTLY_REQUEST`)."""
        order = next(self._order)
        self._turn_of[host] = order
        heapq.heappush(self._turns, (at, order, host))

    def handed_back(self) -> int:
        """How many hosts wait in the heap for their turn."""
        return len(self._turn_of)

    def next_hand_back(self) -> float | None:
        """When the soonest turn of a host handed back comes (None: no host waits)."""
        first = self._first_handed_back()
        return None if first is None else first[0]

    def _first_handed_back(self) -> tuple[float, int, str] | None:
        while self._turns:
            first = self._turns[0]
            if self._turn_of.get(first[2]) == first[1]:
                return first
            heapq.heappop(self._turns)  # superseded
        return None

    def _turns_come(self) -> None:
        """Hosts whose turn has come leave the heap for the back of the ready queue (of
        its costly part for a costly host)."""
        now = self.clock.now()
        while (first := self._first_handed_back()) is not None and first[0] <= now:
            heapq.heappop(self._turns)
            del self._turn_of[first[2]]
            host = first[2]
            (self._ready_costly if self.costly(host) else self._ready).append(host)

    def costly(self, host: str) -> bool:
        """Whether ``host``'s requests cost at least :data:`COSTLY_REQUEST` of polite time."""
        return self.politeness.request_cost(host) >= COSTLY_REQUEST

    def take_ready(self, limit: int | None = None) -> list[str]:
        """The costly hosts handed back whose turn has come (:data:`COSTLY_REQUEST`), then
        the hosts that got work since the last call, oldest work first, then the other
        hosts handed back whose turn has come; at most ``limit`` of them (the others stay
        ready for a later call)."""
        self._turns_come()
        ready: list[str] = []
        for queue in (self._ready_costly, self._ready):
            while queue and (limit is None or len(ready) < limit):
                ready.append(queue.popleft())
        return ready

    # -- addresses --

    def set_address(self, host: str, address: str) -> None:
        """``host``'s requests go to ``address`` (``addr:port``)."""
        self._address[host] = address
        self.politeness.set_group(host, address)

    @asynccontextmanager
    async def address_turn(self, host: str) -> AsyncIterator[None]:
        """Hold ``host``'s address for one request. Among the hosts waiting for it, those
        whose requests are costly (:data:`COSTLY_REQUEST`) go first, each followed by
        another host's request when one waits; each class in the order asked (see
        :class:`_AddressTurn`)."""
        address = self._address.get(host, host)
        turn = self._address_turns.setdefault(address, _AddressTurn())
        await turn.acquire(self.costly(host))
        try:
            yield
        finally:
            turn.release()

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

    async def wait_turn(self, host: str, hold: float = math.inf) -> bool:
        """Sleep until ``host``'s next request may start; False if it is skipped for now.
        :class:`TurnLater` when that is more than ``hold`` seconds away (not slept)."""
        try:
            while True:
                at = self.politeness.ready_at(host)
                if at is None:
                    return False
                now = self.clock.now()
                if at <= now:
                    return True
                if at - now > hold:
                    raise TurnLater(host, at)
                self._waiting[host] = at
                await self.clock.sleep_until(at)
        finally:
            self._waiting.pop(host, None)

    def turn_at(self, host: str) -> float | None:
        """When ``host``'s next request may start; None if it is skipped for now."""
        return self.politeness.ready_at(host)

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
