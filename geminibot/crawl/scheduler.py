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
paced as one: one request at a time to the address (:meth:`Scheduler.address_turn`), and
each host's wait counted from the address's last request as well as from the host's own
(see :mod:`~geminibot.crawl.politeness`). A server that limits its rate per client
address then sees one polite client, not one per virtual host. The address's state lives
in memory for the run (the per-host state is what the store keeps).

A worker does not sleep through a host's long waits: a host whose next turn is more than
a short bound away (the crawler's ``HOLD_TURN``; :meth:`Scheduler.wait_turn` raises
:class:`TurnLater`), or that has had its share of pages in a row (``TURN_PAGES``), is
handed back (:meth:`Scheduler.hand_back`) to a heap keyed by the time its turn comes;
:meth:`Scheduler.take_ready` moves the hosts whose turn has come from the heap to the
ready queue, and the worker takes another ready host. A waiting host thus costs a heap
entry, not a task, and hosts with slow paces (a delay, a 44's back-off, a visit window)
or with many pages take turns with the others instead of holding the workers.

Which ready host goes first: one that has not had a turn in this run (every capsule gets
its policy files read and its first pages fetched early, whatever its size) or whose
work left is a long chain (at least :data:`LONG_CHAIN` seconds), then the others; in
each part the one with the most work left (:meth:`Scheduler.work_left`: its queued URLs,
counted in memory, times the polite wall time each of its requests costs). A long chain
that waited behind every capsule not yet visited each time its worker handed it back
(after its share of pages, or a 44's back-off) was the end of the crawl (issue 15: the
space's biggest host and its rate-limited ones, at half their polite pace during the
bulk, ran alone for minutes at the end); which host's request
gets a busy address next: by turns, the one with the most work left and the one that
has waited longest (:class:`Turns`). Each host is a chain of requests
one at a time, so a crawl lasts at least as long as its longest chain (and as its
busiest address's requests, one at a time): served in turn like the others, the biggest
and the slow capsules were all that was left at the end of a crawl (issue 15). Longest
work first (the classic rule for scheduling chains on few machines) starts the long
chains early and keeps them going, while the short ones fill the gaps.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
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


class GaveWay(Exception):
    """A request gave its address up to a timed chain while it waited for a place in
    flight (:meth:`Scheduler.place_turn`); it asks for its turn again."""

    def __init__(self, host: str) -> None:
        super().__init__(host)
        self.host = host


class TurnLater(Exception):
    """The host's next turn is further away than the worker holds a host: hand it back
    (:meth:`Scheduler.hand_back`) with ``at``, the time its turn comes."""

    def __init__(self, host: str, at: float) -> None:
        super().__init__(host, at)
        self.host = host
        self.at = at


#: The polite wall time a request is taken to cost at least (seconds), for
#: :meth:`Scheduler.work_left`: a host not asked yet has no measured cost, and a fast
#: host's few milliseconds on an idle machine say little about its work left; above
#: this, a host's measured cost (its last request's duration and the wait before its
#: next: delay, or 44 back-off) counts.
REQUEST_COST_FLOOR = 0.01

#: How long before a host's turn its worker takes its address and a place in flight
#: (seconds), then waits the rest holding them: each of those takes a pass of the event
#: loop, about 5 ms when the crawler's CPU is busy (the in-flight governor's
#: ``LAG_HIGH``), which a chain of requests paid at every request on top of its delay
#: (the synthetic Geminispace's biggest capsule, a request every 0.1 s by its
#: ``Request-rate``, made one every 0.13 s). Never early: the request still starts at
#: its turn; the address and the place are held idle for at most this long.
TURN_LEAD = 0.02
#: Work left (seconds, :meth:`Scheduler.work_left`) from which a host that has had a turn
#: still goes with the hosts that have not (before the others): a chain that may be
#: what ends the crawl. Each holds at most one worker, for its turn. Off the test range
#: the default delay (``DEFAULT_MIN_DELAY``, 10 s) makes every host with 6 URLs left
#: such a chain, so there hosts not visited yet come after those (measured only on the
#: synthetic space, with ``--test-range``).
LONG_CHAIN = 60.0
#: A line by work (:class:`Turns`: an address's, the crawl's places in flight) keeps the
#: waiters served from its other line (by age) until
#: they come up; past twice the waiters plus this many entries it is rebuilt without
#: them. Without it, a busy address whose waiters never all left kept every small host's
#: served request in the heap for the whole crawl (the likely cause of the synthetic
#: Geminispace's day-0 peak RSS rising from 130 to 166 MiB with the lines by turns).
ADDRESS_LINE_SLACK = 64


@dataclass(eq=False)
class _Waiter:
    """A request waiting for its address, in both of the address's lines."""

    work: float  # its host's work left when it asked
    event: trio.Event = field(default_factory=trio.Event)
    gone: bool = False  # served, or cancelled: skipped when met in either line


class Turns:
    """``capacity`` places held at once (an address: one request at a time; the crawl:
    the requests allowed in flight); the requests waiting for one are served by turns:
    the one whose host has the most work left (:meth:`Scheduler.work_left`), then the one
    that has waited longest, and so on. The host with the most work gets every other
    place while it asks (its chain of requests is what the crawl's end waits for), and
    no request waits more than twice the line ahead of it (served by work alone, a small
    host's claimed URL waited as long as a big host on its address kept asking). A
    waiter that asks ``first`` (a timed chain: :meth:`Scheduler.goes_first`) is served
    before those unless the place before went to such a waiter: it asks once a turn,
    and each wait is time its chain never makes up (on the synthetic Geminispace the
    biggest capsule, a request every 0.1 s, lost a whole request of another host at
    every other turn when its turn came on the line by age). Never faster: the host's own
    turn and the places' number still hold. ``capacity`` may change while places are
    held: a lower one takes effect as places are released.

    A holder that waits for something else while it holds its place (an address's
    request waiting for a place in flight) may let a waiter that asks first have it
    (:meth:`giving_way`): held idle, the address of the synthetic space's biggest capsule
    kept it waiting 7-11 ms a request on average, past its turn."""

    def __init__(self, capacity: int = 1) -> None:
        self.capacity = capacity
        self.held = 0
        self._most_work: list[tuple[float, int, _Waiter]] = []  # heap: (-work, order, w)
        self._first: list[tuple[float, int, _Waiter]] = []  # the same, of those first
        self._oldest: deque[_Waiter] = deque()
        self._order = itertools.count()
        self._by_work = False  # whether the last waiter served was the one with most work
        self._was_first = False  # whether the last waiter served was served first
        self._waiting = 0  # waiters not gone
        self._giving_way: trio.CancelScope | None = None  # a holder's wait, see giving_way

    @property
    def waiting(self) -> int:
        """Requests waiting for a place."""
        return self._waiting

    def set_capacity(self, capacity: int) -> None:
        """Hold at most ``capacity`` places: more places serve waiters at once; fewer
        wait for places to be released."""
        self.capacity = capacity
        while self.held < self.capacity and (waiter := self._next()) is not None:
            self.held += 1
            self._serve(waiter)

    async def acquire(self, work: float, *, first: bool = False) -> None:
        if self.held < self.capacity:
            await trio.lowlevel.checkpoint()
            if self.held < self.capacity:
                self.held += 1
                return
        waiter = _Waiter(work)
        entry = (-work, next(self._order), waiter)
        self._most_work = self._pushed(self._most_work, entry)
        if first:
            self._first = self._pushed(self._first, entry)
            if self._giving_way is not None:
                self._giving_way.cancel()
        self._oldest.append(waiter)
        self._waiting += 1
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.event.is_set():  # the place was passed to us as we were cancelled
                self.release()  # pass it on
            elif not waiter.gone:
                waiter.gone = True
                self._waiting -= 1
            raise

    @contextmanager
    def giving_way(self) -> Iterator[trio.CancelScope]:
        """A holder's wait for something else, given up (the scope cancelled, its
        ``cancelled_caught`` then true) as soon as a waiter that asks first waits or
        comes: the holder is then to release its place, which that waiter gets next.
        One holder at a time (an address has one place)."""
        with trio.CancelScope() as scope:
            if self._first_waits():
                scope.cancel()
            self._giving_way = scope
            try:
                yield scope
            finally:
                self._giving_way = None

    def _first_waits(self) -> bool:
        """Whether a waiter that asked first is waiting."""
        return self._top(self._first) is not None

    def release(self) -> None:
        """Pass the place to the next waiter by turns (it stays held), or free it."""
        waiter = None if self.held > self.capacity else self._next()
        if waiter is None:
            self.held -= 1
        else:
            self._serve(waiter)

    def _serve(self, waiter: _Waiter) -> None:
        waiter.gone = True
        self._waiting -= 1
        waiter.event.set()

    def _pushed(
        self, line: list[tuple[float, int, _Waiter]], entry: tuple[float, int, _Waiter]
    ) -> list[tuple[float, int, _Waiter]]:
        """``line`` (a heap by work) with ``entry`` pushed, rebuilt first without the
        waiters served past twice the waiters plus :data:`ADDRESS_LINE_SLACK`."""
        if len(line) > 2 * self._waiting + ADDRESS_LINE_SLACK:
            line = [kept for kept in line if not kept[2].gone]
            heapq.heapify(line)
        heapq.heappush(line, entry)
        return line

    def _next(self) -> _Waiter | None:
        """The next waiter by turns (None: none waits)."""
        if not self._was_first and (waiter := self._next_in(self._first)) is not None:
            self._was_first = True
            return waiter
        self._was_first = False
        self._by_work = not self._by_work
        waiter = self._next_in(self._most_work) if self._by_work else self._next_oldest()
        if waiter is None:
            waiter = self._next_oldest() if self._by_work else self._next_in(self._most_work)
        return waiter

    @staticmethod
    def _top(line: list[tuple[float, int, _Waiter]]) -> _Waiter | None:
        """The waiter first in ``line`` (a heap by work), the gone ones above it dropped."""
        while line and line[0][2].gone:
            heapq.heappop(line)
        return line[0][2] if line else None

    @classmethod
    def _next_in(cls, line: list[tuple[float, int, _Waiter]]) -> _Waiter | None:
        """The waiter first in ``line``, taken out of it."""
        waiter = cls._top(line)
        if waiter is not None:
            heapq.heappop(line)
        return waiter

    def _next_oldest(self) -> _Waiter | None:
        while self._oldest:
            waiter = self._oldest.popleft()
            if not waiter.gone:
                return waiter
        return None


class Scheduler:
    def __init__(self, clock: Clock, *, test_range: bool = False, min_delay: float = 0.0) -> None:
        self.clock = clock
        self.politeness = Politeness(clock.now, test_range=test_range, min_delay=min_delay)
        self._work: dict[str, int] = {}  # hosts with queued URLs -> how many (as known)
        # ... that have no worker yet: (later: had a turn and no long chain, -work left
        # when it became ready, order, host); the hosts that had a turn in this run
        self._ready: list[tuple[bool, float, int, str]] = []
        self._had_turn: set[str] = set()
        self._opens: dict[str, float] = {}  # host -> when its visit window opens
        self._waiting: dict[str, float] = {}  # host -> when its worker's turn comes
        self._address: dict[str, str] = {}  # host -> address:port
        self._address_turns: dict[str, Turns] = {}
        # hosts handed back until their turn: (when, order, host); an entry is current
        # while _turn_of[host] is its order (a later hand-back or a take supersedes it)
        self._turns: list[tuple[float, int, str]] = []
        self._turn_of: dict[str, int] = {}
        self._order = itertools.count()

    # -- the ready-host set --

    def restore(self, states: dict[str, HostState], with_work: Mapping[str, int]) -> None:
        """Seed the schedule from the store (after a restart): the hosts' politeness
        states and their queued URLs."""
        for host, s in states.items():
            self.politeness.restore(
                host,
                last_end=s.last_end,
                last_duration=s.last_duration,
                not_before=s.not_before,
                slow_downs=s.slow_downs,
            )
        self.add_work(with_work)

    def add_work(self, work: Mapping[str, int]) -> None:
        """Hosts got this many more queued URLs; those that had none become ready."""
        for host, urls in work.items():
            if host in self._work:
                self._work[host] += urls
            else:
                self._work[host] = urls
                self._make_ready(host)

    def claimed(self, host: str, urls: int = 1) -> None:
        """``urls`` of ``host``'s queued URLs were claimed (negative: given back)."""
        if host in self._work:
            self._work[host] = max(0, self._work[host] - urls)

    def drop_work(self, host: str) -> None:
        """``host``'s queue was found empty (its worker ends)."""
        self._work.pop(host, None)

    def work_left(self, host: str) -> float:
        """Polite wall time ``host``'s queued URLs will take one at a time (seconds): how
        many, times what each request costs (at least :data:`REQUEST_COST_FLOOR`)."""
        cost = max(self.politeness.request_cost(host), REQUEST_COST_FLOOR)
        return self._work.get(host, 0) * cost

    def _ready_key(self, host: str) -> tuple[bool, float]:
        """Where ``host`` goes in the ready queue (smaller first): hosts that have had a
        turn and have less than :data:`LONG_CHAIN` of work left come after the others;
        in each part, the most work left first."""
        work = self.work_left(host)
        return (host in self._had_turn and work < LONG_CHAIN, -work)

    def _make_ready(self, host: str) -> None:
        heapq.heappush(self._ready, (*self._ready_key(host), next(self._order), host))

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
        to the ready queue (:meth:`take_ready`), in its place by its work left."""
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
        """Hosts whose turn has come leave the heap for the ready queue."""
        now = self.clock.now()
        while (first := self._first_handed_back()) is not None and first[0] <= now:
            heapq.heappop(self._turns)
            del self._turn_of[first[2]]
            self._make_ready(first[2])

    def keeps_turn(self, host: str) -> bool:
        """Whether ``host``'s worker may go on past its share of pages in a row
        (``TURN_PAGES``): no ready host is to go before it (see :meth:`take_ready`).
        The longest chain then never waits for a worker between turns: at the end of a
        crawl it is all that is left, so every wait it had is time added to the crawl."""
        self._turns_come()
        if not self._ready:
            return True
        later, minus_work, _, _ = self._ready[0]
        return self._ready_key(host) <= (later, minus_work)

    def take_ready(self, limit: int | None = None) -> list[str]:
        """The ready hosts (new work, and hosts handed back whose turn has come): those
        that have not had a turn in this run and those with at least :data:`LONG_CHAIN`
        of work left first, then the others; in each part the most work left first
        (:meth:`work_left` when each became ready; equal ones in the order they became
        ready); at most ``limit`` of them (the others stay ready for a later call)."""
        self._turns_come()
        ready: list[str] = []
        while self._ready and (limit is None or len(ready) < limit):
            host = heapq.heappop(self._ready)[3]
            self._had_turn.add(host)
            ready.append(host)
        return ready

    # -- addresses --

    def set_address(self, host: str, address: str) -> None:
        """``host``'s requests go to ``address`` (``addr:port``)."""
        self._address[host] = address
        self.politeness.set_group(host, address)

    @asynccontextmanager
    async def address_turn(self, host: str) -> AsyncIterator[Turns]:
        """Hold ``host``'s address for one request (the ``with`` gives its
        :class:`Turns`, for :meth:`place_turn`'s ``holding``). The requests waiting for
        it are served by turns: a timed chain's (:meth:`goes_first`) first, then the one
        whose host has the most work left (:meth:`work_left`), then the one that has
        waited longest (see :class:`Turns`)."""
        address = self._address.get(host, host)
        turns = self._address_turns.setdefault(address, Turns())
        async with self.place_turn(turns, host):
            yield turns

    @asynccontextmanager
    async def place_turn(
        self, turns: Turns, host: str, *, holding: Turns | None = None
    ) -> AsyncIterator[None]:
        """Hold one of ``turns``' places (an address's, the crawl's in flight) for one of
        ``host``'s requests, in line by its work left (:meth:`work_left`), first if it is
        a timed chain (:meth:`goes_first`). ``holding``: the address the request holds
        as it waits; unless it is a timed chain itself, :class:`GaveWay` when a timed
        chain asks for that address meanwhile (:meth:`Turns.giving_way`): the request
        is to let the address go and ask for its turn again."""
        work = self.work_left(host)
        first = self.goes_first(host, work)
        if holding is None or first:
            await turns.acquire(work, first=first)
        else:
            with holding.giving_way() as wait:
                await turns.acquire(work)
            if wait.cancelled_caught:
                raise GaveWay(host)
        try:
            yield
        finally:
            turns.release()

    def goes_first(self, host: str, work: float | None = None) -> bool:
        """Whether ``host`` is a timed chain: it waits between its requests (a delay or
        rate over zero) and has at least :data:`LONG_CHAIN` of work left (``work``: its
        :meth:`work_left`, if known). Its requests go first among those waiting for a
        place (:class:`Turns`): it asks once a turn, and a wait for its address or a
        place in flight is time its chain never makes up, while a host without a delay
        loses nothing it would not wait anyway."""
        work = self.work_left(host) if work is None else work
        return work >= LONG_CHAIN and self.politeness.delay(host) > 0

    # -- one host's schedule --

    def set_pace(self, host: str, delay: float | None, *, between_starts: bool = False) -> None:
        """The site policy's delay (None: the rule of thumb; ``between_starts``: a rate's,
        counted start to start), and the visit window that :meth:`wait_for_window`
        announced, if any."""
        opens = self._opens.pop(host, None)
        window = None if opens is None else (lambda t: max(t, opens))
        pace = HostPace(delay=delay, between_starts=between_starts, window_opens=window)
        self.politeness.set_pace(host, pace)

    def wait_for_window(self, host: str, opens: float) -> bool:
        """The next request to ``host`` waits for a visit window opening at ``opens``;
        False when that is too far away (the host is then skipped for now)."""
        self._opens[host] = opens
        return self.politeness.ready_at(host) is not None

    async def wait_turn(self, host: str, hold: float = math.inf) -> bool:
        """Sleep until :data:`TURN_LEAD` before ``host``'s next request may start; False if
        it is skipped for now. :class:`TurnLater` when that is more than ``hold`` seconds
        away (not slept)."""
        try:
            while True:
                at = self.politeness.ready_at(host)
                if at is None:
                    return False
                now = self.clock.now()
                if at - TURN_LEAD <= now:
                    return True
                if at - now > hold:
                    raise TurnLater(host, at)
                self._waiting[host] = at
                await self.clock.sleep_until(at - TURN_LEAD)
        finally:
            self._waiting.pop(host, None)

    async def until_turn(self, host: str) -> bool:
        """Sleep the rest of the way to ``host``'s turn (at most :data:`TURN_LEAD` once
        :meth:`turn_now` said so); False if it is skipped for now."""
        at = self.politeness.ready_at(host)
        if at is None:
            return False
        if at > self.clock.now():
            await self.clock.sleep_until(at)
        return True

    def turn_at(self, host: str) -> float | None:
        """When ``host``'s next request may start; None if it is skipped for now."""
        return self.politeness.ready_at(host)

    def turn_now(self, host: str) -> bool | None:
        """Whether ``host``'s next request may start within :data:`TURN_LEAD` (the rest is
        waited by :meth:`until_turn`); None if it is skipped for now."""
        at = self.politeness.ready_at(host)
        return None if at is None else at - TURN_LEAD <= self.clock.now()

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
