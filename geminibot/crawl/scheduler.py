"""Which host the crawl asks next, and when: download slots, as Scrapy has them.

Every host with queued URLs is waiting in a heap by the time its next request is due
(:class:`~geminibot.crawl.politeness.Politeness` says when: the site policy's delay or
rate, a 44's back-off, a visit window, its address's pace), ready (due now), or out with
a worker. A fixed set of workers takes hosts (:meth:`Scheduler.next_host`), makes one
request for each (a page, or a policy file) and gives it back with its next due time
(:meth:`Scheduler.give_back`), or drops it when it has nothing left for this run.

Among the hosts due, those not asked yet in this run go first (each host's first turn
early, whatever its size: its work is not known before; it reads the host's policy files
and its first page as far as the pace allows in one turn; a host given back before its
first request, its address's slot taken, is still one), then the longest work first
(LPT, the classic rule for scheduling chains of jobs on a few machines: a crawl lasts at
least as long as its longest chain of requests one at a time; the host with the most
work left, :meth:`Scheduler.work_left`, starts first, short chains fill the gaps).

An address (``address port N`` as resolved, --connect-to applied: several capsules on
one server) is one download slot, out with one worker at a time: one request at a time
goes to it, whichever of its hosts makes it, and each host's wait counts from the
address's last request too. Each slot keeps its hosts due in a heap of its own, and
workers take from the free slots only (a heap of them, by their first host): no worker
queues behind a busy address while others have work, and a slot's return costs one heap
step, however many capsules share its address. A server that limits its rate per client
address sees one polite client, not one per virtual host.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping
from dataclasses import asdict

import trio

from geminibot.crawl.clock import Clock, wait_for
from geminibot.crawl.politeness import HostPace, Politeness
from geminibot.store.crawlstore import HostState

#: The polite wall time a request is taken to cost at least (seconds), for
#: :meth:`Scheduler.work_left`: a host not asked yet has no measured cost, and a fast
#: host's few milliseconds say little about its work left.
REQUEST_COST_FLOOR = 0.01

Ready = tuple[bool, float, int, str]  # (asked before in this run, -work left, order, host)


class Scheduler:
    """The hosts with work, in order of when each is due and, among those due, the hosts
    not asked yet, then longest work first; one slot per address; the politeness
    schedule of each host."""

    def __init__(self, clock: Clock, *, test_range: bool = False, min_delay: float = 0.0) -> None:
        self.clock = clock
        self.politeness = Politeness(clock.now, test_range=test_range, min_delay=min_delay)
        self._work: dict[str, int] = {}  # host -> its queued URLs (as far as known here)
        self._due: list[tuple[float, int, str]] = []  # waiting: (due, order, host)
        self._ready: dict[str, list[Ready]] = {}  # slot -> its hosts due (a heap)
        # the free slots with hosts due, by their first host (entries gone stale, of a
        # slot taken or a host gone meanwhile, are skipped when they come up)
        self._free_slots: list[tuple[Ready, str]] = []
        self._asked: set[str] = set()  # hosts with a request made in this run
        self._placed: set[str] = set()  # hosts waiting or due
        self._out: dict[str, str] = {}  # host a worker has now -> the slot it holds
        self._busy: set[str] = set()  # slots (addresses) out with a worker
        self._order = itertools.count()
        self._changed = trio.Event()  # set when a host is placed or given back
        self._taking = trio.Lock()  # one worker waits on the heaps, the others in line
        self._opens: dict[str, float] = {}  # host -> when its visit window opens
        self._address: dict[str, str] = {}  # host -> address (its own until known)

    # -- work --

    def restore(self, states: Mapping[str, HostState], with_work: Mapping[str, int]) -> None:
        """Seed the schedule from the store (after a restart): the hosts' politeness
        states and their queued URLs."""
        for host, state in states.items():
            self.politeness.restore(host, **asdict(state))
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

    def add_new_hosts(self, work: Mapping[str, int]) -> dict[str, int]:
        """Hosts got queued URLs this crawl did not queue (a ``/submit``, another
        process): those not in the schedule are placed, as :meth:`add_work` places them;
        those in it claim the new URLs in their turns. Returns the hosts placed."""
        new = {h: n for h, n in work.items() if h not in self._placed and h not in self._out}
        self.add_work(new)
        return new

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
        """The host due not asked yet in this run, else the one with the most work left,
        among the hosts of free slots (a busy slot's wait in its heap) whose pace allows
        a request now (the others wait again), the hosts due moved in first."""
        now = self.clock.now()
        while self._due and self._due[0][0] <= now:
            _, order, host = heapq.heappop(self._due)
            self._make_ready((host in self._asked, -self.work_left(host), order, host))
        while self._free_slots:
            entry, slot = heapq.heappop(self._free_slots)
            queue = self._ready.get(slot)
            if slot in self._busy or not queue or queue[0] is not entry:
                continue  # stale: taken, or its first host changed since
            heapq.heappop(queue)
            if not queue:
                del self._ready[slot]
            host = entry[3]
            at = self.politeness.ready_at(host)  # (never before the time it read: compare
            if at is not None and at > self.clock.now():  # with a later one, not ``now``)
                heapq.heappush(self._due, (at, entry[2], host))
                self._offer(slot)
                continue
            self._placed.discard(host)
            self._out[host] = slot
            self._busy.add(slot)
            return host
        return None

    def _make_ready(self, entry: Ready) -> None:
        """A host is due: into its slot's heap (the slot offered if it heads it)."""
        slot = self._address.get(entry[3], entry[3])
        queue = self._ready.setdefault(slot, [])
        heapq.heappush(queue, entry)
        if queue[0] is entry:
            self._offer(slot)

    def _offer(self, slot: str) -> None:
        """``slot`` is free: its first host due, if any, can be taken."""
        queue = self._ready.get(slot)
        if queue and slot not in self._busy:
            heapq.heappush(self._free_slots, (queue[0], slot))

    def _free(self, host: str) -> None:
        """No worker has ``host`` now: its slot is free, its hosts due can go."""
        slot = self._out.pop(host)
        self._busy.discard(slot)
        self._offer(slot)
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
                await wait_for(self._changed, self.clock, self._due[0][0] if self._due else None)

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
            heapq.heapify(self._due)
            slot = self._address.get(host, host)
            self._ready[slot] = [e for e in self._ready.get(slot, ()) if e[3] != host]
            heapq.heapify(self._ready[slot])
            self._offer(slot)

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
        """A request to ``host`` starts now (from now on it is a host asked before)."""
        self._asked.add(host)
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
