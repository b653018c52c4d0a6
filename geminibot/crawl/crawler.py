"""The crawl loop: a trio nursery of per-host workers that ties the parts together.

The parts: the store (:mod:`geminibot.crawl.store`: the frontier, host state, policy-file
cache, decisions, fetch log and index, all of the crawl's SQL), the scheduler
(:mod:`geminibot.crawl.scheduler`: which hosts have work, when each may be asked next),
one adapter per protocol (:mod:`geminibot.crawl.adapters`) and the site-policy discovery
(:mod:`geminibot.policy.discovery`, no I/O).

Per host, one worker: it first learns the host's policy
(:mod:`geminibot.crawl.policy_files`: each policy file from the cache, or fetched under
the same politeness rules as any request, redirects followed as RFC 9309 2.3.1.2 asks), then claims the host's queued URLs one by one, checks each against the
site policy for the declared bot (the decision is recorded), waits its turn, fetches, and
commits the page, its links and the new frontier rows in one transaction. A shared
:class:`~geminibot.crawl.scheduler.Turns` bounds the requests in flight across hosts
(``concurrency``, fewer while the crawler's CPU is saturated:
:mod:`geminibot.crawl.inflight`), served by turns, the host with the most work left and
the request that waited longest (as each address is); a worker holds a place only while
its request runs. A worker keeps its host for one turn: while the host's next request is
due within :data:`HOLD_TURN`, at most :data:`TURN_PAGES` pages unless no ready host is to
go before it (:meth:`~geminibot.crawl.scheduler.Scheduler.keeps_turn`); then the host is
handed back to the scheduler's heap until its next turn (lease and policy kept) and the
worker ends, its place going to another ready host (see :mod:`geminibot.crawl.scheduler`).

The fetcher is injected (``fetch(url) -> Response``): the command line passes a
:class:`geminibot.crawl.fetcher.ProtocolFetcher` (Gemini and http(s)), tests may pass anything
that answers. Web hosts are crawled by the same loop (see :mod:`geminibot.crawl.schemes`
for their host keys): the fetcher is then also called with ``method`` and ``headers``
(``X-Agent-Identity`` when a robots2.txt says ``announce: yes``; the HEAD request of the
robots2 ask protocol when ``crawl: ask``), and 429 and 503 slow the host down as 44 does.
A crawl follows links only to the protocols of its seeds, plus those of ``follow``.

The clock is injected (:class:`~geminibot.crawl.scheduler.Clock`); by default it is
wall-clock time advanced by trio's clock, so the politeness state persisted in the database
stays meaningful across restarts, and tests under trio's mock clock do not sleep.

Crash safety: see :mod:`geminibot.crawl.frontier`. Cancellation (Ctrl-C) releases the
leases of the requests it interrupts, so a stopped crawl resumes exactly where it was.
"""

from __future__ import annotations

import fnmatch
import math
import os
import socket
import sqlite3
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Protocol

import trio

from geminibot import __version__
from geminibot.crawl.adapters import WEB_SLOW_DOWN, Adapter, Fetch, Response, adapter_for
from geminibot.crawl.freshness import (
    DAY,
    LOG_RETENTION_DAYS,
    canonical_key,
    is_gone,
    next_interval,
    retry_delay,
)
from geminibot.crawl.frontier import Claim, Limits
from geminibot.crawl.inflight import PROBE_INTERVAL, WINDOW, InFlight
from geminibot.crawl.policy_files import PolicyFiles, Sent, Skip
from geminibot.crawl.scheduler import (
    Clock,
    GaveWay,
    Scheduler,
    TrioWallClock,
    TurnLater,
    Turns,
)
from geminibot.crawl.schemes import (
    host_key,
    host_name,
    host_protocol,
    host_url,
    normalise,
    protocol_of,
)
from geminibot.crawl.settings import DEFAULT_AGENT, DEFAULT_CONCURRENCY
from geminibot.crawl.store import (
    CrawlStore,
    DecisionRecord,
    FetchedPage,
    FetchRecord,
    LostHost,
    Revisit,
    SqliteStore,
)
from geminibot.policy.robots2_ask import AskLedger, AskOutcome, AskRequest, AskResponse, ask_outcome
from geminibot.policy.site_policy import Bot, FetchDecision, SitePolicy
from geminibot.urls import Scheme

__all__ = [
    "WEB_SLOW_DOWN",
    "ConfigMismatch",
    "CrawlOptions",
    "Crawler",
    "Fetch",
    "Progress",
    "Response",
]

#: Host workers at once per request allowed in flight (``concurrency``). A worker holds
#: its host's policy, the URL it claimed and its task while it waits for its turn, tens
#: of KiB; one worker for every host with work made memory grow with the hosts (on the
#: synthetic space, about 3,400 of 4,400 hosts held a claimed URL at once), while a few
#: per slot keep every slot busy. The other hosts wait in the scheduler's ready queue,
#: or in its heap until their turn (see :data:`HOLD_TURN`).
WORKERS_PER_SLOT = 4
#: Longest wait for a host's turn that its worker sits out (seconds). A host whose next
#: request is further away (its delay, a 44's back-off, a visit window) is handed back to
#: the scheduler's heap until then, its claimed URL (if any) back in the queue, and the
#: worker takes another ready host: a worker sleeping through a one-second delay would
#: hold one of the :data:`WORKERS_PER_SLOT` places that another host could use.
HOLD_TURN = 0.25
#: Pages a host's worker fetches in a row before it hands the host back (to the back of
#: the ready queue, at its next turn): a 15,000-URL host takes turns with the others
#: instead of holding a worker for hours while other hosts were never started. Unless
#: no ready host is to go before it (:meth:`Scheduler.keeps_turn`): the longest chain
#: then keeps its worker.
TURN_PAGES = 8
#: Site policies of hosts handed back kept in memory for their next turn (about 2 KiB
#: each for the synthetic space's policy files; 4,400 capsules in Geminispace); beyond
#: this many (the least recently handed back first) a host's next turn reads its policy
#: again from the store's cache of policy files: no request, but about 5 ms of CPU, more
#: than a page's fetch.
POLICIES_KEPT = 8192
#: ... only for a policy read from at most this many bytes of files (a policy file may be
#: 500 KiB): a larger one is read again from the cache at each turn.
POLICY_KEPT_MAX_BYTES = 8192
#: robots2.txt category each role declares (project decision; None: global directives only).
ROLE_CATEGORIES: dict[str, str | None] = {
    "indexer": "search-indexer",
    "archiver": None,
    "researcher": None,
}
#: Seconds between two progress reports.
PROGRESS_INTERVAL = 0.5
#: Seconds a crawl process with nothing to do waits before it looks again at the hosts
#: that other processes sharing the store hold, when every one of them is leased (a
#: store shared by several processes): not polling the database while they work. A dead
#: process's host is taken over at most this long after its lease ran out.
HELD_BACKOFF = 5.0
#: Seconds it waits when some of those hosts are free now (their holder let them go),
#: before it takes them: a host another process is taking at that instant is then its.
HELD_FREE_PAUSE = 0.1
#: An ask answer is applied to the decision it was asked for during this long.
ASK_DECISION_WINDOW = timedelta(seconds=1)


class Archive(Protocol):
    """Where ``--as archiver`` keeps every response (WARC files)."""

    def write(self, url: str, response: Response, fetched_at: float) -> None: ...


@dataclass(frozen=True)
class CrawlOptions:
    role: str = "indexer"
    agent: str = DEFAULT_AGENT
    strict: bool = False
    max_pages: int | None = None
    limits: Limits = field(default_factory=Limits)
    allow_hosts: tuple[str, ...] = ()  # fnmatch patterns, beside the seeds' own hosts
    exclude: tuple[str, ...] = ()  # fnmatch patterns of URLs never fetched (--exclude)
    max_time: float | None = None  # seconds, then the crawl stops (resumable)
    min_delay: float = 0.0  # seconds: a floor under every host's delay (--min-delay)
    concurrency: int = DEFAULT_CONCURRENCY
    test_range: bool = False
    follow: tuple[Scheme, ...] = ()  # protocols followed beyond the seeds' own
    refresh: bool = False  # revisit every finished URL now, due or not
    max_hosts: int | None = None  # hosts worked on at once (None: every host with work)


@dataclass
class Progress:
    """Live counters (this run) and a few gauges, for the progress display."""

    started: float
    pages: int = 0
    requests: int = 0
    errors: int = 0
    refused: int = 0
    slow_downs: int = 0
    revisits: int = 0  # finished URLs queued again when the run started (due, or --refresh)
    unchanged: int = 0  # revisited pages found unchanged (not re-indexed)
    gone: int = 0  # URLs that answered 51/52 (out of the index)
    vanished: int = 0  # pages out of the index at the end: their host vanished (freshness)
    queued: int = 0
    hosts_active: int = 0
    hosts_seen: int = 0
    excluded: int = 0
    last_error: str | None = None  # the last request's error, for the closing line
    hosts_skipped: dict[str, str] = field(default_factory=dict)
    elapsed: float = 0.0
    in_flight: int = 0
    #: Requests allowed in flight now: ``concurrency``, less while the crawler's event
    #: loop is saturated (:mod:`geminibot.crawl.inflight`).
    in_flight_limit: int = 0
    #: What the crawl waits for when nothing is in flight: (host, seconds until its turn).
    next_request: tuple[str, float] | None = None
    #: Why the crawl ended before its queue was empty ("--max-pages", "--max-time"), if so.
    limit: str | None = None

    @property
    def rate(self) -> float:
        """Pages per second over the whole run (the display shows a recent window)."""
        return self.pages / self.elapsed if self.elapsed > 0 else 0.0


class ConfigMismatch(Exception):
    """The database was crawled with another role or agent; resuming would mix them."""


class Crawler:
    def __init__(
        self,
        conn: sqlite3.Connection | CrawlStore,
        fetch: Fetch,
        options: CrawlOptions,
        *,
        archive: Archive | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        wall_clock: Callable[[], float] = time.time,
        clock: Clock | None = None,
        address_of: Callable[[str], Awaitable[str]] | None = None,
        cpu_clock: Callable[[], float] = time.process_time,
    ) -> None:
        self.fetch = fetch
        #: The process's CPU seconds, for the share of a core it uses
        #: (:mod:`geminibot.crawl.inflight`).
        self._cpu_clock = cpu_clock
        #: Where a host key's requests go (``address:port``): hosts that share one are
        #: paced as one as well (see :mod:`geminibot.crawl.scheduler`). By default each
        #: host is its own address.
        self.address_of = address_of if address_of is not None else _own_address
        self.options = options
        self.archive = archive
        self.on_progress = on_progress
        self._clock = clock if clock is not None else TrioWallClock(wall_clock)
        self._wall0 = self._clock.now()
        self.store: CrawlStore = (
            SqliteStore(conn, self.clock, options.limits, batch=True)
            if isinstance(conn, sqlite3.Connection)
            else conn
        )
        self.scheduler = Scheduler(
            self._clock, test_range=options.test_range, min_delay=options.min_delay
        )
        self.policy_files = PolicyFiles(self.store, self.clock, self._policy_request, self._slowed)
        # Names this process to the others sharing the store (which machine holds a host).
        self.lease = f"{uuid.uuid4().hex}@{socket.gethostname()}:{os.getpid()}"
        self._capped = False  # hosts were left out for --max-hosts: look again later
        self.progress = Progress(started=self._wall0)
        self.bot = Bot(
            options.agent,
            (options.role,),
            ROLE_CATEGORIES.get(options.role),
            options.strict,
            __version__,
        )
        self._patterns = tuple(p.lower() for p in options.allow_hosts)
        self._seed_hosts: set[str] = set()  # host names of the seeds, always allowed
        self._host_allowed: dict[str, bool] = {}  # host -> whether a pattern matches it
        self._protocols: set[Scheme] = set(options.follow)
        self._asks: dict[str, AskLedger] = {}
        self._running: set[str] = set()  # hosts with a worker now
        self._handed_back: set[str] = set()  # hosts held here, waiting for their turn
        #: site policies of hosts handed back, for their next turn (:data:`POLICIES_KEPT`)
        self._policies: OrderedDict[str, SitePolicy] = OrderedDict()
        self._skipped: dict[str, str] = {}
        self._wake = trio.Event()
        self._stopping = False
        self._reserved = 0
        self._queued = 0  # URLs queued, kept up to date in memory for the display
        self._in_flight = 0
        self._addressed: set[str] = set()  # hosts whose address the scheduler knows
        self._pages_before = 0
        self._places: Turns | None = None  # the requests allowed in flight, by turns
        self._in_flight_limit = InFlight(options.concurrency)
        self._sending = trio.Event()  # set when a request starts (the lag probe waits)
        self._cancel: trio.CancelScope | None = None

    @property
    def frontier(self) -> CrawlStore:
        """The queue side of the store (``state_of``, ``queued``, ``leased``)."""
        return self.store

    # --- time ---

    def clock(self) -> float:
        """Wall-clock seconds (by default advanced by trio's clock once the crawl runs)."""
        return self._clock.now()

    def _at(self, when: float | None = None) -> datetime:
        return datetime.fromtimestamp(self.clock() if when is None else when, UTC)

    # --- setup ---

    def check_settings(self) -> None:
        """Refuse to resume a database crawled with another role or agent."""
        differs = self.store.check_settings(
            {"role": self.options.role, "agent": self.options.agent}
        )
        if differs is not None:
            key, stored, value = differs
            raise ConfigMismatch(
                f"this database was crawled with {key} {stored!r}, not {value!r}: "
                "use another --db or the same setting"
            )

    def seed(self, urls: list[str]) -> dict[str, str]:
        """Queue the seeds (known ones stay as they are). The seeds' hosts are always the
        crawl's hosts; --allow-host patterns add others."""
        for url in urls:
            try:
                self._seed_hosts.add(host_name(host_key(url)))
                self._protocols.add(protocol_of(url))
            except ValueError:
                pass
        self._host_allowed.clear()
        return self.store.seed([u for u in urls if self.excluded_by(u) is None])

    def host_allowed(self, host: str) -> bool:
        """Whether a host key is a seed's host (compared as it is: ``[::1]:1971`` is no
        pattern) or matches an --allow-host pattern (by key, or by host name alone, so a
        pattern covers the Gemini and web sides of a host)."""
        known = self._host_allowed.get(host)
        if known is None:
            key = host.lower()
            name = host_name(key)
            known = self._host_allowed[host] = name in self._seed_hosts or any(
                fnmatch.fnmatchcase(key, p) or fnmatch.fnmatchcase(name, p) for p in self._patterns
            )
        return known

    def excluded_by(self, url: str) -> str | None:
        """The first --exclude pattern that matches ``url``, if any."""
        return next((p for p in self.options.exclude if fnmatch.fnmatchcase(url, p)), None)

    # --- the run ---

    async def run(self) -> Progress:
        """Crawl until the frontier is empty (for the hosts that can go on), the page
        limit is reached, or :meth:`stop` is called. Returns the final counters; what the
        store holds back is committed however the run ends (see
        :class:`~geminibot.crawl.store.SqliteStore`)."""
        try:
            return await self._run()
        finally:
            self.store.end_run()

    async def _run(self) -> Progress:
        self._clock.start()
        self.check_settings()
        self.store.recover()
        now = self.clock()
        self.store.prune_logs(now - LOG_RETENTION_DAYS * DAY)
        self.progress.revisits = self.store.revisit(now, self.options.refresh)
        self.scheduler.restore(self.store.host_states(), self.store.hosts_with_work())
        self._pages_before = self.store.count_pages()
        self._queued = self.store.queued()
        self._places = Turns(self._in_flight_limit.limit)
        max_time = self.options.max_time
        with trio.move_on_after(math.inf if max_time is None else max_time) as timer:
            async with trio.open_nursery() as nursery:
                self._cancel = nursery.cancel_scope
                nursery.start_soon(self._govern_in_flight)
                if self.on_progress is not None:
                    nursery.start_soon(self._report_progress, self.on_progress)
                while not self._stopping:
                    self._spawn(nursery)
                    if not self._running and not self._handed_back:
                        if not await self._await_held_work():
                            break
                        continue
                    self._wake = trio.Event()
                    await self._await_wake()
                nursery.cancel_scope.cancel()
        for host in self._handed_back:  # (a host's worker releases its own)
            self.store.release_host(host, self.lease)
        self._handed_back.clear()
        self._policies.clear()
        if timer.cancelled_caught:
            self.progress.limit = "--max-time"
        elif self.progress.limit is None and self._limit_met() and not self._stopping:
            self.progress.limit = "--max-pages"
        self.progress.vanished = self.store.delist_vanished(self.clock())
        self._update_progress()
        self.progress.queued = self.store.queued()
        self.progress.hosts_seen = self.store.count_hosts()
        return self.progress

    async def _await_wake(self) -> None:
        """Wait until a worker ends or work arrives (:attr:`_wake`), or, when a worker
        could start, until the next turn of a host handed back comes."""
        due = self.scheduler.next_hand_back()
        if due is None or len(self._running) >= self._workers_max():
            await self._wake.wait()
            return
        async with trio.open_nursery() as nursery:

            async def turn_comes() -> None:
                await self._clock.sleep_until(due)
                nursery.cancel_scope.cancel()

            nursery.start_soon(turn_comes)
            await self._wake.wait()
            nursery.cancel_scope.cancel()

    async def _await_held_work(self) -> bool:
        """No worker runs here: wait for work that other crawl processes sharing the store
        hold (their hosts come free when they finish or their leases expire). False when
        there is none for this crawl."""
        if self._limit_reached():
            return False
        held = {
            host: wait
            for host, wait in self.store.work_elsewhere(self.lease).items()
            if host not in self._skipped and self.host_allowed(host)
        }
        if not held:
            return False
        free = [host for host, wait in held.items() if wait <= 0]
        if not free:  # all leased: back off (a lease running out sooner is waited for)
            await trio.sleep(min(*held.values(), HELD_BACKOFF))
            return True
        await trio.sleep(HELD_FREE_PAUSE)
        for host in free:  # (a host whose worker here ended may still count as work)
            self.scheduler.drop_work(host)
        self.scheduler.add_work(dict.fromkeys(free, 1))  # (how many: not known here)
        return True

    def stop(self) -> None:
        """Stop now: interrupt requests in flight (their URLs go back to the queue)."""
        self._stopping = True
        if self._cancel is not None:
            self._cancel.cancel()

    def _spawn(self, nursery: trio.Nursery) -> None:
        if self._limit_met():
            # A limit met ends the crawl: no policy file fetch, no 44 sat out for a page
            # that will not be fetched (the requests in flight go back to the queue).
            self.progress.limit = "--max-pages"
            if self._cancel is not None:
                self._cancel.cancel()
            return
        if self._limit_reached():
            return  # the pages in flight may meet it: start nothing more
        cap = self.options.max_hosts
        if self._capped and cap is not None and self._hosts_held() < cap:
            self._capped = False  # room again: the hosts left out (or another's, now free)
            held = {h for h, wait in self.store.work_elsewhere(self.lease).items() if wait > 0}
            work = self.store.hosts_with_work()
            self.scheduler.add_work({h: n for h, n in work.items() if h not in held})
        for host in self._take_ready():
            if host in self._handed_back:  # its turn came: it is still held here
                self._handed_back.discard(host)
                self._running.add(host)
                nursery.start_soon(self._worker, host)
                continue
            if host in self._running or host in self._skipped or not self.host_allowed(host):
                continue  # a host not allowed, or skipped, stays out for this run
            if cap is not None and self._hosts_held() >= cap:
                self.scheduler.drop_work(host)  # for another process, or for later
                self._capped = True
                continue
            self._running.add(host)
            nursery.start_soon(self._worker, host)

    def _hosts_held(self) -> int:
        """Hosts this process works on: with a worker, or handed back until their turn."""
        return len(self._running) + len(self._handed_back)

    def _workers_max(self) -> int:
        """Host workers at once (:data:`WORKERS_PER_SLOT` per request allowed in flight)."""
        return self._in_flight_limit.limit * WORKERS_PER_SLOT

    async def _govern_in_flight(self) -> None:
        """Probe the event loop's lag and the process's CPU time, and set the requests
        allowed in flight from them (:mod:`geminibot.crawl.inflight`), window after
        window."""
        assert self._places is not None
        lags: list[float] = []
        waited = False
        start, cpu = trio.current_time(), self._cpu_clock()
        while True:
            if not self._in_flight:  # nothing to hold up: no timer (a mock clock jumps)
                self._sending = trio.Event()
                await self._sending.wait()
                lags.clear()
                start, cpu = trio.current_time(), self._cpu_clock()
            before = trio.current_time()
            await trio.sleep(PROBE_INTERVAL)
            after = trio.current_time()
            lags.append(max(0.0, after - before - PROBE_INTERVAL))
            waited = waited or self._places.waiting > 0
            if after - start >= WINDOW:
                now_cpu = self._cpu_clock()
                busy = (now_cpu - cpu) / (after - start)
                self._places.set_capacity(self._in_flight_limit.observe(lags, waited, busy))
                lags.clear()
                waited = False
                start, cpu = after, now_cpu

    def _take_ready(self) -> Iterator[str]:
        """Ready hosts while there is room for workers (:data:`WORKERS_PER_SLOT`)."""
        workers = self._workers_max()
        while len(self._running) < workers:
            batch = self.scheduler.take_ready(workers - len(self._running))
            if not batch:
                return
            yield from batch

    def _limit_met(self) -> bool:
        """The db holds --max-pages pages."""
        limit = self.options.max_pages
        return limit is not None and self._pages_before + self.progress.pages >= limit

    def _limit_reached(self) -> bool:
        """... or will once the page requests in flight are done."""
        limit = self.options.max_pages
        if limit is None:
            return False
        return self._pages_before + self.progress.pages + self._reserved >= limit

    async def _report_progress(self, report: Callable[[Progress], None]) -> None:
        while True:
            self._update_progress()
            report(self.progress)
            await trio.sleep(PROGRESS_INTERVAL)

    def _update_progress(self) -> None:
        """Gauges from counters kept in memory (no query of the store per repaint)."""
        p = self.progress
        p.elapsed = self.clock() - self._wall0
        p.queued = self._queued
        p.hosts_active = self._hosts_held()
        p.hosts_seen = self.scheduler.hosts_with_work()
        p.hosts_skipped = dict(self._skipped)
        p.in_flight = self._in_flight
        p.in_flight_limit = self._in_flight_limit.limit
        waiting = self.scheduler.next_turn()
        now = self.clock()
        p.next_request = None if waiting is None else (waiting[0], max(0.0, waiting[1] - now))

    def _slowed(self) -> None:
        self.progress.slow_downs += 1

    def _skip(self, host: str, reason: str) -> None:
        self._skipped[host] = reason
        self.store.skip_host(host, reason)

    # --- one host ---

    async def _worker(self, host: str) -> None:
        try:
            await self._work_on(host)
        except LostHost:  # another process took the host over: its claim is theirs now
            self.scheduler.drop_work(host)

    async def _work_on(self, host: str) -> None:
        """One turn of ``host`` (:meth:`_turn`); then it is handed back to the scheduler's
        heap (its lease kept, taken again at its next turn) unless its queue ran dry, it
        is skipped or the crawl stops (the lease then let go)."""
        lease = self.store.lease_host(host, self.lease)
        if lease is None:  # another crawl process holds the host (or took it over)
            self.scheduler.drop_work(host)
            self._policies.pop(host, None)
            self._running.discard(host)
            self._wake.set()
            return
        if lease.state is not None:  # the pace goes on from where its last holder left it
            self.scheduler.restore({host: lease.state}, {})
        later: tuple[float, SitePolicy | None] | None = None
        try:
            if host not in self._addressed:  # hosts on one address are paced as one
                self._addressed.add(host)
                self.scheduler.set_address(host, await self.address_of(host))
            later = await self._turn(host, self._policies.pop(host, None))
        finally:
            if later is None:
                self.store.release_host(host, self.lease)
            else:
                self._hand_back(host, *later)
            self._running.discard(host)
            self._wake.set()

    async def _turn(
        self, host: str, policy: SitePolicy | None
    ) -> tuple[float, SitePolicy | None] | None:
        """``host``'s pages while its next request comes within :data:`HOLD_TURN`, at most
        :data:`TURN_PAGES` of them unless :meth:`Scheduler.keeps_turn` -> (when its next
        turn comes, its policy), or None when the host is done for this run (queue empty,
        skipped, the crawl stops)."""
        pages = 0
        while not self._stopping and not self._limit_reached():
            try:
                policy = await self._current_policy(host, policy)
            except TurnLater as later:  # between two policy files: read on at that turn
                return later.at, None
            if policy is None:
                return None
            at = self.scheduler.turn_at(host)
            if at is None:
                self._skip(host, self.scheduler.skipped(host) or "skipped")
                return None
            now = self.clock()
            if at - now > HOLD_TURN or (
                pages >= TURN_PAGES and not self.scheduler.keeps_turn(host)
            ):
                return max(at, now), policy
            claim = self.store.claim(host, self.lease)
            if claim is None:
                self.scheduler.drop_work(host)
                return None
            self.scheduler.claimed(host)
            pages += 1
            try:
                await self._claimed(claim, policy)
            except TurnLater as later:  # the URL went back to the queue, for that turn
                return later.at, policy
            skipped = self.scheduler.skipped(host)
            if skipped:
                self._skip(host, skipped)
                return None
        return None

    async def _claimed(self, claim: Claim, policy: SitePolicy) -> None:
        """Visit a claimed URL; it goes back to the queue unless its row was closed."""
        self._queued -= 1
        done = False
        try:
            done = await self._visit(claim, policy)
        except TurnLater:
            raise
        except Exception:
            # The URL stays leased: the next run's recovery counts this as an
            # attempt cut short, and gives the URL up after MAX_URL_ATTEMPTS.
            # (LostHost: it is the new holder's claim now.)
            done = True
            raise
        finally:
            if not done:
                self.store.release(claim.url)
                self._queued += 1
                self.scheduler.claimed(claim.host, -1)

    def _hand_back(self, host: str, at: float, policy: SitePolicy | None) -> None:
        """``host`` waits in the scheduler's heap until ``at``, held by this process; its
        policy kept for its next turn (at most :data:`POLICIES_KEPT` of them, each read
        from at most :data:`POLICY_KEPT_MAX_BYTES`)."""
        self._handed_back.add(host)
        self.scheduler.hand_back(host, at)
        if policy is not None and self.policy_files.sizes.get(host, 0) <= POLICY_KEPT_MAX_BYTES:
            self._policies[host] = policy
        while len(self._policies) > POLICIES_KEPT:
            self._policies.popitem(last=False)

    async def _current_policy(self, host: str, policy: SitePolicy | None) -> SitePolicy | None:
        """``policy``, or the host's policy read from its files when there is none yet or
        one of the files it rests on has expired (RFC 9309 2.4: a cached copy is used for
        at most 24 hours, also within one long run); None: the host is skipped."""
        if policy is not None and not self.policy_files.expired(host):
            return policy
        read = await self.policy_files.site_policy(host)
        if isinstance(read, Skip):
            self._skip(host, read.reason or self.scheduler.skipped(host) or "skipped")
            return None
        return read

    async def _request(
        self,
        host: str,
        url: str,
        policy: SitePolicy | None = None,
        *,
        method: str = "GET",
        headers: tuple[tuple[str, str], ...] = (),
        claimed: str | None = None,
        hold: float = math.inf,
    ) -> Sent | None:
        """Wait for the host's turn, then fetch; None if the host is skipped for now;
        :class:`LostHost` if another process took the host over meanwhile (``claimed``:
        the URL this process claimed for the request, which must still be its claim);
        :class:`TurnLater` if the turn is more than ``hold`` seconds away (not waited for).

        ``policy`` sets the pace (with none, the default delay applies: the policy files
        themselves are fetched before it is known) and whether to announce the bot."""
        adapter = adapter_for(host)
        if policy is not None:
            last_duration = self.scheduler.last_duration(host)
            answer = policy.delay(self.bot, self._at(), last_duration, url)
            if answer.file:
                self.scheduler.set_pace(host, answer.seconds, between_starts=answer.between_starts)
            else:
                self.scheduler.set_pace(host, None)
        while True:
            # Wait for the host's own turn first, then for its address (another host on
            # the same server may hold it), and check the turn again once it is ours;
            # a timed chain asking for the address while we wait for a place in flight
            # gets it first, and we ask again (GaveWay).
            if not await self.scheduler.wait_turn(host, hold):
                return None
            try:
                async with self.scheduler.address_turn(host) as address:
                    turn = self.scheduler.turn_now(host)
                    if turn is None:
                        return None
                    if turn:
                        return await self._send(
                            host, url, policy, adapter, method, headers, claimed, address
                        )
            except GaveWay:
                pass

    async def _policy_request(
        self, host: str, url: str, policy: SitePolicy | None, resumable: bool
    ) -> Sent | None:
        """A policy file's request; one that starts a file's fetch (``resumable``: its
        read can stop there, the files before it are cached) hands the host back when its
        turn is more than :data:`HOLD_TURN` away, the others (a redirect, a 44 sat out)
        are waited for."""
        return await self._request(host, url, policy, hold=HOLD_TURN if resumable else math.inf)

    async def _send(
        self,
        host: str,
        url: str,
        policy: SitePolicy | None,
        adapter: Adapter,
        method: str,
        headers: tuple[tuple[str, str], ...],
        claimed: str | None,
        address: Turns,
    ) -> Sent | None:
        """:meth:`_request` once it is the host's turn and its ``address`` is ours."""
        assert self._places is not None
        async with self.scheduler.place_turn(self._places, host, holding=address):
            # after every wait (for a place in flight too): is the host (and the claim) still ours?
            # (On SQLite this also commits the claim's attempt before its request.)
            if not self.store.hold_host(host, self.lease, claimed):
                raise LostHost(host)
            if not await self.scheduler.until_turn(host):  # (TURN_LEAD at most)
                return None
            self.scheduler.start(host)
            self._in_flight += 1
            self._sending.set()
            started = self.clock()
            response: Response | None = None
            try:
                response = await adapter.send(
                    self.fetch, url, method=method, headers=headers, announce=self._announce(policy)
                )
            except Exception as exc:  # a fetcher should not raise; count it as a failure
                response = Response(None, error=f"{type(exc).__name__}: {exc}")
            finally:
                self._in_flight -= 1
                duration = max(0.0, self.clock() - started)
                status, meta = (None, "") if response is None else (response.status, response.meta)
                state = self.scheduler.finish(
                    host, duration, status, meta, slow_down=adapter.slows_down(status)
                )
        self.progress.requests += 1
        if response.status is None or response.cut:
            self.progress.errors += 1
            self.progress.last_error = f"{url}: {response.error}"
        record = FetchRecord(
            url, host, response.status, response.meta, response.error, started, duration, state
        )
        return Sent(response, record)

    def _announce(self, policy: SitePolicy | None) -> tuple[tuple[str, str], ...]:
        """``X-Agent-Identity`` when the host's robots2.txt says ``announce: yes``."""
        if policy is None or policy.robots2 is None:
            return ()
        setting = policy.robots2.setting("announce", self.bot.category)
        if setting is None or setting.value != "yes":
            return ()
        return (("X-Agent-Identity", self.bot.identity),)

    # --- one URL ---

    def _decision(self, claim: Claim, decision: FetchDecision) -> DecisionRecord:
        return DecisionRecord(
            claim.url, claim.host, decision.allowed, decision.reason, self.clock()
        )

    async def _ask(
        self, claim: Claim, policy: SitePolicy, request: AskRequest
    ) -> AskOutcome | None:
        """Perform the robots2 ask exchange (HEAD) for ``claim``'s host; log the request.
        None when the host is skipped for now."""
        url = host_url(claim.host, request.target)
        sent = await self._request(
            claim.host,
            url,
            policy,
            method=request.method,
            headers=request.headers,
            claimed=claim.url,
            hold=HOLD_TURN,
        )
        if sent is None:
            return None
        self.store.log_fetch(sent.record)
        return ask_outcome(AskResponse(sent.response.status, sent.response.headers), self._at())

    async def _decide(self, claim: Claim, policy: SitePolicy) -> FetchDecision | None:
        """The site policy's decision, after the ask exchange when robots2.txt says
        ``crawl: ask`` and nothing else refuses. None: ask again later (429, skipped)."""
        asks = self._asks.setdefault(claim.host, AskLedger())
        decision = policy.may_fetch(claim.url, self.bot, self._at(), asks)
        refusals = [r for r in decision.reasons if not r.allowed]
        if decision.ask is None or len(refusals) != 1:
            return decision
        outcome = await self._ask(claim, policy, decision.ask)
        if outcome is None or outcome.kind == "retry":
            return None  # the 429 slowed the host down; the URL is asked about again later
        asks.record("crawl", outcome)
        # Apply this answer to this decision (an allow-once is never remembered beyond it).
        now = self._at()
        once = AskLedger({"crawl": replace(outcome, cache_until=now + ASK_DECISION_WINDOW)})
        return policy.may_fetch(claim.url, self.bot, now, once)

    async def _visit(self, claim: Claim, policy: SitePolicy) -> bool:
        """Decide, fetch and commit one URL; True when its row is closed (not leased)."""
        pattern = self.excluded_by(claim.url)
        if pattern is not None:  # queued by an earlier run without this --exclude
            why = f"excluded by --exclude {pattern}"
            self.store.refused(DecisionRecord(claim.url, claim.host, False, why, self.clock()))
            self.progress.excluded += 1
            return True
        decision = await self._decide(claim, policy)
        if decision is None:
            return False
        if not decision.allowed:
            asks = self._asks[claim.host]
            opens = policy.next_allowed(claim.url, self.bot, self._at(), asks)
            if opens is not None:  # outside the visit window: wait for it, or come back later
                if not self.scheduler.wait_for_window(claim.host, opens.timestamp()):
                    return False
                decision = policy.may_fetch(claim.url, self.bot, opens, asks)
        if not decision.allowed:
            # asked again when its interval says: a policy file may change its mind
            previous = self.store.previous(claim.url)
            interval = next_interval(previous.interval if previous else None, changed=False)
            revisit = Revisit(self.clock() + interval, interval)
            self.store.refused(self._decision(claim, decision), revisit)
            self.progress.refused += 1
            return True
        self._reserved += 1
        try:
            sent = await self._request(
                claim.host, claim.url, policy, claimed=claim.url, hold=HOLD_TURN
            )
        finally:
            self._reserved -= 1
        if sent is None:
            return False
        adapter = adapter_for(claim.host)
        if adapter.slows_down(sent.response.status):
            self._slowed()
            self.store.slowed_down(sent.record)
            self._queued += 1
            return True
        if sent.response.status is None or sent.response.cut:
            self._failed(claim, decision, sent.record)
            return True
        self._index(claim, decision, sent, policy, adapter)
        return True

    def _failed(self, claim: Claim, decision: FetchDecision, record: FetchRecord) -> None:
        """Record a failed request; retried with back-off, a bounded number of times (the
        claim counted this attempt: see :mod:`geminibot.crawl.frontier`)."""
        previous = self.store.previous(claim.url)
        delay = retry_delay(previous.attempts if previous else 1)
        retry = None if delay is None else self.clock() + delay
        revisit = Revisit(retry, previous.interval if previous else None)
        self.store.failed(self._decision(claim, decision), record, revisit)

    def _index(
        self,
        claim: Claim,
        decision: FetchDecision,
        sent: Sent,
        policy: SitePolicy,
        adapter: Adapter,
    ) -> None:
        """Extract, de-duplicate, archive and commit a fetched page and its links."""
        response, fetched_at = sent.response, sent.record.started
        try:
            extracted = adapter.extract(claim.url, claim.host, response, fetched_at)
        except Exception as exc:  # a hostile page must not stop the crawl (issue 13.13)
            error = f"cannot read the page: {type(exc).__name__}: {exc}"
            self._failed(claim, decision, replace(sent.record, error=error))
            self.progress.errors += 1
            return
        page, links = extracted.page, extracted.links
        previous = self.store.previous(claim.url)
        original = demote = None
        if page.content_hash is not None:
            original = self.store.duplicate_of(page.content_hash, page.url)
        gone = is_gone(host_protocol(claim.host), page.status)
        unchanged = (
            not gone
            and previous is not None
            and previous.status == page.status
            and previous.content_hash == page.content_hash
            and previous.duplicate_of == original
        )
        if original is not None and not unchanged:
            if canonical_key(page.url) < canonical_key(original):
                demote = original  # this URL is the better name of the body
            else:
                page, links = replace(page, duplicate_of=original, links=()), ()
        interval = next_interval(previous.interval if previous else None, changed=not unchanged)
        revisit = None if gone else Revisit(self.clock() + interval, interval)
        keeps_copies = _may_store(policy, self.bot)
        if not keeps_copies:
            # robots2.txt store: no / session-only: nothing of the content is persisted;
            # the index keeps the page's metadata and links only, and no WARC record.
            page = replace(page, title="", headings=(), text=None)
        if self.archive is not None and keeps_copies:
            self.archive.write(claim.url, response, fetched_at)
        woken = self.store.fetched(
            FetchedPage(
                self._decision(claim, decision),
                sent.record,
                page,
                self.options.role,
                () if unchanged or gone else self._followed(links, claim),
                revisit=revisit,
                unchanged=unchanged,
                gone=gone,
                demote=demote,
            )
        )
        self.progress.pages += 1
        self.progress.unchanged += unchanged
        self.progress.gone += gone
        self._queued += sum(woken.values())
        if woken:
            self.scheduler.add_work(woken)
        if woken or self._limit_met():
            self._wake.set()

    def _followed(self, links: tuple[str, ...], claim: Claim) -> list[tuple[str, int, str]]:
        """The links a crawl follows: its protocols and hosts, normalised."""
        out = []
        for raw in links:
            try:
                link, target_host = normalise(raw), host_key(raw)
                followed = protocol_of(raw) in self._protocols
            except ValueError:
                continue  # neither gemini:// nor http(s)://, or a broken URL
            if followed and self.host_allowed(target_host) and self.excluded_by(link) is None:
                out.append((link, claim.depth + 1, claim.url))
        return out


async def _own_address(host: str) -> str:
    return host


#: robots2.txt ``store`` values under which no content may be persisted.
NO_STORE_VALUES = frozenset({"no", "session-only"})


def _may_store(policy: SitePolicy, bot: Bot) -> bool:
    """Whether the host's robots2.txt lets ``bot`` keep what it fetched."""
    return policy.usage_map(bot).get("store") not in NO_STORE_VALUES
