"""Which host the crawl asks next, and when: download slots, as Scrapy has them.

Every host with queued URLs is waiting in a heap by the time its next request is due
(:class:`~geminibot.crawl.politeness.Politeness` says when: the site policy's delay or
rate, a 44's back-off, a visit window, its address's pace), ready (due now), or out with
a worker. A fixed set of workers takes hosts (:meth:`Scheduler.next_host`), makes one
request for each (a page, or a policy file) and gives it back with its next due time
(:meth:`Scheduler.give_back`), or drops it when it has nothing left for this run.

Among the hosts due, those not taken yet in this run go first (each host's first turn
early, whatever its size: its work is not known before; it reads the host's policy files
and its first page as far as the pace allows in one turn), then the longest
work first (LPT, the classic rule for scheduling chains of jobs on a few machines: a
crawl lasts at least as long as its longest chain of requests one at a time; the host
with the most work left, :meth:`Scheduler.work_left`, starts first, short chains fill
the gaps).

An address (``address port N`` as resolved, --connect-to applied: several capsules on
one server) is one download slot, out with one worker at a time: one request at a time
goes to it, whichever of its hosts makes it, and each host's wait counts from the
address's last request too. A ready host whose address is out is parked until it comes
back, so no worker queues behind a busy address while others have work. A server that
limits its rate per client address sees one polite client, not one per virtual host.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping

import trio

from geminibot.crawl.clock import Clock
from geminibot.crawl.politeness import HostPace, Politeness
from geminibot.crawl.store import HostState

#: The polite wall time a request is taken to cost at least (seconds), for
#: :meth:`Scheduler.work_left`: a host not taken yet has no measured cost, and a fast
#: host's few milliseconds say little about its work left.
REQUEST_COST_FLOOR = 0.01


class Scheduler:
    """The hosts with work, in order of when each is due and, among those due, the hosts
    not taken yet, then longest work first; one slot per address; the politeness
    schedule of each host."""

    def __init__(self, clock: Clock, *, test_range: bool = False, min_delay: float = 0.0) -> None:
        self.clock = clock
        self.politeness = Politeness(clock.now, test_range=test_range, min_delay=min_delay)
        self._work: dict[str, int] = {}  # host -> its queued URLs (as far as known here)
        self._due: list[tuple[float, int, str]] = []  # waiting: (due, order, host)
        # due: (asked before in this run, -work left, order, host)
        self._ready: list[tuple[bool, float, int, str]] = []
        self._asked: set[str] = set()  # hosts taken at least once in this run
        self._placed: set[str] = set()  # hosts in either heap, or parked
        self._out: dict[str, str] = {}  # host a worker has now -> the slot it holds
        self._busy: set[str] = set()  # slots (addresses) out with a worker
        # a busy slot -> its ready hosts, back in the ready heap when the slot is free
        self._parked: dict[str, list[tuple[bool, float, int, str]]] = {}
        self._order = itertools.count()
        self._changed = trio.Event()  # set when a host is placed or given back
        self._taking = trio.Lock()  # one worker waits on the heaps, the others in line
        self._opens: dict[str, float] = {}  # host -> when its visit window opens
        self._address: dict[str, str] = {}  # host -> address (its own until known)

    # -- work --

    def restore(self, states: Mapping[str, HostState], with_work: Mapping[str, int]) -> None:
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
        """Hosts got this many more queued URLs; those not placed nor out are placed, due
        now (a worker learns the host's policy, from the cache of policy files if it
        can, and its next due time)."""
        now = self.clock.now()
        for host, urls in work.items():
            self._work[host] = self._work.get(host, 0) + urls
            if host not in self._placed and host not in self._out:
                self._place(host, now)

    def claimed(self, host: str) -> None:
        """One of ``host``'s queued URLs was claimed."""
        if host in self._work:
            self._work[host] = max(0, self._work[host] - 1)

    def released(self, host: str) -> None:
        """A claimed URL of ``host`` went back to the queue."""
        if host in self._work:
            self._work[host] += 1

    def work_left(self, host: str) -> float:
        """Polite wall time ``host``'s queued URLs will take one at a time (seconds): how
        many, times what each request costs (at least :data:`REQUEST_COST_FLOOR`)."""
        cost = max(self.politeness.request_cost(host), REQUEST_COST_FLOOR)
        return self._work.get(host, 0) * cost

    def hosts_with_work(self) -> int:
        """How many hosts have queued URLs (as far as the crawl knows)."""
        return len(self._work)

    # -- handing hosts to workers --

    def _place(self, host: str, due: float) -> None:
        self._placed.add(host)
        heapq.heappush(self._due, (due, next(self._order), host))
        self._changed.set()

    def _take_due(self) -> str | None:
        """The ready host not taken yet in this run, else the one with the most work
        left, among those whose address is free (the others are parked) and whose pace
        allows a request now (the others wait again), the hosts due moved in first."""
        now = self.clock.now()
        while self._due and self._due[0][0] <= now:
            _, order, host = heapq.heappop(self._due)
            entry = (host in self._asked, -self.work_left(host), order, host)
            heapq.heappush(self._ready, entry)
        while self._ready:
            entry = heapq.heappop(self._ready)
            host = entry[3]
            slot = self._address.get(host, host)
            if slot in self._busy:
                self._parked.setdefault(slot, []).append(entry)
                continue
            at = self.politeness.ready_at(host)  # (never before the time it read: compare
            if at is not None and at > self.clock.now():  # with a later one, not ``now``)
                heapq.heappush(self._due, (at, entry[2], host))
                continue
            self._asked.add(host)
            self._placed.discard(host)
            self._out[host] = slot
            self._busy.add(slot)
            return host
        return None

    def _free(self, host: str) -> None:
        """No worker has ``host`` now: its slot is free, the hosts parked on it ready."""
        slot = self._out.pop(host)
        self._busy.discard(slot)
        for entry in self._parked.pop(slot, ()):
            heapq.heappush(self._ready, entry)
        self._changed.set()

    async def next_host(self) -> str | None:
        """Wait for a host that is due and take it (see :meth:`_take_due`); None when no
        host has work and no worker has one (what it may add is all there is)."""
        async with self._taking:
            while True:
                host = self._take_due()
                if host is not None:
                    return host
                if not self._due and not self._out:
                    return None
                self._changed = trio.Event()
                await self._until_changed_or(self._due[0][0] if self._due else None)

    async def _until_changed_or(self, due: float | None) -> None:
        """Wait until a host is placed or given back, or until ``due`` on the crawl's
        clock (not trio's: a test's clock that jumps to the end of each wait then never
        sleeps for real)."""
        async with trio.open_nursery() as nursery:

            async def until_changed() -> None:
                await self._changed.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(until_changed)
            if due is not None:
                await self.clock.sleep_until(due)
                nursery.cancel_scope.cancel()

    def give_back(self, host: str, due: float) -> None:
        """The worker is done with ``host`` for now: it is placed again, due at ``due``."""
        self._free(host)
        self._place(host, due)

    def drop(self, host: str) -> None:
        """``host`` has nothing more for this run here (its queue is empty, it is skipped
        or another process has it): it leaves the schedule until it gets work again."""
        self._work.pop(host, None)
        if host in self._out:
            self._free(host)
        elif host in self._placed:  # (rare: a host dropped before its worker took it)
            self._placed.discard(host)
            self._due = [entry for entry in self._due if entry[2] != host]
            self._ready = [entry for entry in self._ready if entry[3] != host]
            heapq.heapify(self._due)
            heapq.heapify(self._ready)
            parked = self._parked.get(self._address.get(host, host), [])
            parked[:] = [entry for entry in parked if entry[3] != host]

    def next_due(self) -> tuple[str, float] | None:
        """The waiting host due soonest, and when (None: none waits)."""
        if not self._due:
            return None
        due, _, host = self._due[0]
        return host, due

    # -- addresses --

    def set_address(self, host: str, address: str) -> None:
        """``host``'s requests go to ``address``: it is paced with the address's other
        hosts, and shares their slot. A host out (taken while its address was not
        known) holds the address's slot from now on if it is free (else see
        :meth:`slot_taken`)."""
        self._address[host] = address
        self.politeness.set_group(host, address)
        if self._out.get(host) == host and address not in self._busy:
            self._busy.discard(host)
            self._busy.add(address)
            self._out[host] = address

    def slot_taken(self, host: str) -> bool:
        """``host`` is out, but its address's slot is another worker's (the host was
        taken before its address was known): give it back; it goes when the slot is
        free."""
        address = self._address.get(host, host)
        return host in self._out and self._out[host] != address and address in self._busy

    # -- one host's pace --

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

    def ready_at(self, host: str) -> float | None:
        """When ``host``'s next request may start; None if it is skipped for now."""
        return self.politeness.ready_at(host)

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
