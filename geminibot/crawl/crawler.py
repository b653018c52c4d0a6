"""The crawl loop: a trio nursery of per-host workers that ties the parts together.

The parts: the store (:mod:`geminibot.crawl.store`: the frontier, host state, policy-file
cache, decisions, fetch log and index, all of the crawl's SQL), the scheduler
(:mod:`geminibot.crawl.scheduler`: which hosts have work, when each may be asked next),
one adapter per protocol (:mod:`geminibot.crawl.adapters`) and the site-policy discovery
(:mod:`geminibot.policy.discovery`, no I/O).

A fixed set of workers (``concurrency`` of them: the requests in flight at most) takes
hosts from the scheduler, the one due next (longest work first among those due), and
makes one request for each: a policy file until the host's policy is known
(:mod:`geminibot.crawl.policy_files`: each file from the cache, or fetched under the same
politeness rules as any request, redirects followed as RFC 9309 2.3.1.2 asks), then one
of its queued URLs: claimed, checked against the site policy for the declared bot (the
decision is recorded), fetched with its address's slot, and committed with its links and
the new frontier rows in one transaction. The worker then gives the host back to the
scheduler with the time its next request is due (its lease and its policy kept), or
drops it when it has nothing more for this run.

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

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
from geminibot.crawl.policy_files import Later, PolicyFiles, Sent, Skip
from geminibot.crawl.scheduler import Clock, Scheduler, TrioWallClock
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

#: Bytes of policy files whose site policies are kept in memory between a host's turns
#: (the least recently used beyond it are read again from the store's cache of policy
#: files at their host's next turn: no request, but milliseconds of CPU, more than a
#: page's fetch). The synthetic space's policies are about 2 KiB each.
POLICY_CACHE_BYTES = 16 * 1024 * 1024
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


#: A request not sent because another crawl process took its host over.
Lost = Literal["lost"]
#: What became of a claimed URL: its row closed (``"done"``), the host lost, or the URL
#: back in the queue (for the host's next turn: :class:`Later`; None: for a later run).
Visited = Literal["done"] | Lost | Later | None


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
    #: Requests allowed in flight: ``concurrency``, one per worker.
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
    """The crawl engine: a fixed set of workers that take hosts from the
    :class:`~geminibot.crawl.scheduler.Scheduler`, read each host's site policy, and
    claim, decide, fetch and commit its URLs one request at a time."""

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
    ) -> None:
        self.fetch = fetch
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
        self._leased: set[str] = set()  # hosts this process works on (leased)
        #: site policies of hosts between turns, least recently used first, and the
        #: bytes of files they were read from (:data:`POLICY_CACHE_BYTES`)
        self._policies: OrderedDict[str, tuple[SitePolicy, int]] = OrderedDict()
        self._policy_bytes = 0
        self._skipped: dict[str, str] = {}
        self._stopping = False
        self._reserved = 0
        self._queued = 0  # URLs queued, kept up to date in memory for the display
        self._in_flight = 0
        self._addressed: set[str] = set()  # hosts whose address the scheduler knows
        self._pages_before = 0
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
        max_time = self.options.max_time
        with trio.move_on_after(math.inf if max_time is None else max_time) as timer:
            async with trio.open_nursery() as nursery:
                self._cancel = nursery.cancel_scope
                if self.on_progress is not None:
                    nursery.start_soon(self._report_progress, self.on_progress)
                while not self._stopping and not self._limit_met():
                    async with trio.open_nursery() as workers:
                        for _ in range(self.options.concurrency):
                            workers.start_soon(self._worker)
                    if not await self._await_held_work():
                        break
                nursery.cancel_scope.cancel()
        for host in self._leased:
            self.store.release_host(host, self.lease)
        self._leased.clear()
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

    async def _await_held_work(self) -> bool:
        """No host has work here: wait for work that other crawl processes sharing the
        store hold (their hosts come free when they finish or their leases expire).
        False when there is none for this crawl."""
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
        self.scheduler.add_work(dict.fromkeys(free, 1))  # (how many: not known here)
        return True

    def stop(self) -> None:
        """Stop now: interrupt requests in flight (their URLs go back to the queue)."""
        self._stopping = True
        if self._cancel is not None:
            self._cancel.cancel()

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
        p.hosts_active = len(self._leased)
        p.hosts_seen = self.scheduler.hosts_with_work()
        p.hosts_skipped = dict(self._skipped)
        p.in_flight = self._in_flight
        p.in_flight_limit = self.options.concurrency
        waiting = self.scheduler.next_due()
        now = self.clock()
        p.next_request = None if waiting is None else (waiting[0], max(0.0, waiting[1] - now))

    def _slowed(self) -> None:
        self.progress.slow_downs += 1

    def _skip(self, host: str, reason: str) -> None:
        self._skipped[host] = reason
        self.store.skip_host(host, reason)

    # --- one host ---

    async def _worker(self) -> None:
        """Take the host due next, make its next request, give it back; until no host
        has work (the crawl stops it otherwise)."""
        while not self._limit_reached() and (host := await self.scheduler.next_host()):
            due = await self._turn(host)
            if due is None:
                self._let_go(host)
            else:
                self.scheduler.give_back(host, due)
        if self._limit_met() and self._cancel is not None:
            # A limit met ends the crawl: no policy file fetch, no 44 sat out for a page
            # that will not be fetched (the requests in flight go back to the queue).
            self.progress.limit = "--max-pages"
            self._cancel.cancel()

    async def _turn(self, host: str) -> float | None:
        """One turn of ``host``: its site policy (a policy file read, or from memory),
        then one of its URLs -> when its next request is due, or None when it is done
        for this run (queue empty, skipped, another process holds it, --max-hosts)."""
        if self._stopping or host in self._skipped or not self.host_allowed(host):
            return None
        if not await self._lease(host):
            return None
        cached = self._policies.pop(host, None)
        if cached is not None:
            self._policy_bytes -= cached[1]
        policy = await self._current_policy(host, None if cached is None else cached[0])
        if policy is None:
            return None
        if isinstance(policy, Later):
            return policy.at
        due = self._due(host)
        if due is not None and due <= self.clock():
            due = await self._next_url(host, policy)
        if due is not None:
            self._keep_policy(host, policy)
        return due

    def _due(self, host: str) -> float | None:
        """When ``host``'s next request is due; None (and the host skipped) if it waits
        beyond the longest wait."""
        due = self.scheduler.ready_at(host)
        if due is None:
            self._skip(host, self.scheduler.skipped(host) or "skipped")
        return due

    async def _lease(self, host: str) -> bool:
        """Take or renew ``host``'s lease for this turn; False when another crawl
        process holds it, or the host would be one more than --max-hosts."""
        cap = self.options.max_hosts
        if cap is not None and host not in self._leased and len(self._leased) >= cap:
            self._capped = True  # for another process, or for later
            return False
        lease = self.store.lease_host(host, self.lease)
        if lease is None:  # another crawl process holds the host (or took it over)
            self._leased.discard(host)
            return False
        self._leased.add(host)
        if lease.state is not None:  # the pace goes on from where its last holder left it
            self.scheduler.restore({host: lease.state}, {})
        if host not in self._addressed:  # hosts on one address are paced as one
            self._addressed.add(host)
            self.scheduler.set_address(host, await self.address_of(host))
        return True

    def _let_go(self, host: str) -> None:
        """``host`` is done for this run here: out of the schedule, its lease let go; the
        hosts left out for --max-hosts come in when there is room again."""
        self.scheduler.drop(host)
        self._drop_policy(host)
        if host in self._leased:
            self._leased.discard(host)
            self.store.release_host(host, self.lease)
        cap = self.options.max_hosts
        if self._capped and cap is not None and len(self._leased) < cap:
            self._capped = False  # room again: the hosts left out (or another's, now free)
            held = {h for h, wait in self.store.work_elsewhere(self.lease).items() if wait > 0}
            work = self.store.hosts_with_work()
            self.scheduler.add_work(
                {h: n for h, n in work.items() if h not in held and h not in self._leased}
            )

    async def _next_url(self, host: str, policy: SitePolicy) -> float | None:
        """Claim ``host``'s next URL and visit it -> when the host's next request is
        due (None: done for this run)."""
        claim = self.store.claim(host, self.lease)
        if claim is None:
            return None
        self.scheduler.claimed(host)
        self._queued -= 1
        outcome: Visited = None
        try:
            outcome = await self._visit(claim, policy)
        except Exception:
            # The URL stays leased: the next run's recovery counts this as an
            # attempt cut short, and gives the URL up after MAX_URL_ATTEMPTS.
            outcome = "lost"
            raise
        finally:
            if outcome is None or isinstance(outcome, Later):
                self.store.release(claim.url)
                self._queued += 1
                self.scheduler.released(host)
        if outcome == "lost":  # another crawl process took the host: the claim is theirs
            return None
        if isinstance(outcome, Later):
            return outcome.at
        skipped = self.scheduler.skipped(host)
        if skipped:
            self._skip(host, skipped)
            return None
        return self._due(host)

    def _keep_policy(self, host: str, policy: SitePolicy) -> None:
        """Keep ``host``'s policy for its next turn, within :data:`POLICY_CACHE_BYTES`."""
        size = self.policy_files.sizes.get(host, 0)
        if size > POLICY_CACHE_BYTES:
            return
        self._policies[host] = (policy, size)
        self._policy_bytes += size
        while self._policy_bytes > POLICY_CACHE_BYTES:
            _, (_, dropped) = self._policies.popitem(last=False)
            self._policy_bytes -= dropped

    def _drop_policy(self, host: str) -> None:
        cached = self._policies.pop(host, None)
        if cached is not None:
            self._policy_bytes -= cached[1]

    async def _current_policy(
        self, host: str, policy: SitePolicy | None
    ) -> SitePolicy | Later | None:
        """``policy``, or the host's policy read from its files when there is none yet or
        one of the files it rests on has expired (RFC 9309 2.4: a cached copy is used for
        at most 24 hours, also within one long run); :class:`Later`: the read goes on at
        the host's next turn; None: the host is skipped."""
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
        wait: bool = False,
    ) -> Sent | Later | Lost | None:
        """Fetch ``url`` in ``host``'s turn, with its address's slot. None: the host is
        skipped for now; :class:`Later`: its turn has not come (``wait``: waited for
        instead); ``"lost"``: another crawl process took the host over (``claimed``: the
        URL this process claimed for the request, which must still be its claim).

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
            due = self.scheduler.ready_at(host)
            if due is not None and due <= self.clock():
                # Its turn: take the address's slot (another host on the same server may
                # hold it), and check the turn again once the slot is ours.
                async with self.scheduler.address_slot(host):
                    due = self.scheduler.ready_at(host)
                    if due is not None and due <= self.clock():
                        return await self._send(
                            host, url, policy, adapter, method, headers, claimed
                        )
            if due is None:
                return None
            if not wait:
                return Later(due)
            await self._clock.sleep_until(due)

    async def _policy_request(
        self, host: str, url: str, policy: SitePolicy | None, resumable: bool
    ) -> Sent | Later | None:
        """A policy file's request; one that starts a file's fetch (``resumable``: its
        read can stop there, the files before it are cached) gives the host back when its
        turn has not come, the others (a redirect, a 44 sat out) wait for it."""
        sent = await self._request(host, url, policy, wait=not resumable)
        return None if sent == "lost" else sent

    async def _send(
        self,
        host: str,
        url: str,
        policy: SitePolicy | None,
        adapter: Adapter,
        method: str,
        headers: tuple[tuple[str, str], ...],
        claimed: str | None,
    ) -> Sent | Lost:
        """:meth:`_request` once it is the host's turn and its address's slot is ours."""
        # Is the host (and the claim) still ours? (On SQLite this also commits the
        # claim's attempt before its request.)
        if not self.store.hold_host(host, self.lease, claimed):
            return "lost"
        self.scheduler.start(host)
        self._in_flight += 1
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
    ) -> AskOutcome | Later | Lost | None:
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
        )
        if not isinstance(sent, Sent):
            return sent
        self.store.log_fetch(sent.record)
        return ask_outcome(AskResponse(sent.response.status, sent.response.headers), self._at())

    async def _decide(
        self, claim: Claim, policy: SitePolicy
    ) -> tuple[FetchDecision, bool] | Later | Lost | None:
        """The site policy's decision, and whether the host was asked for it (the ask
        exchange, when robots2.txt says ``crawl: ask`` and nothing else refuses). None:
        ask again later (429, skipped)."""
        asks = self._asks.setdefault(claim.host, AskLedger())
        decision = policy.may_fetch(claim.url, self.bot, self._at(), asks)
        refusals = [r for r in decision.reasons if not r.allowed]
        if decision.ask is None or len(refusals) != 1:
            return decision, False
        outcome = await self._ask(claim, policy, decision.ask)
        if not isinstance(outcome, AskOutcome):
            return outcome
        if outcome.kind == "retry":
            return None  # the 429 slowed the host down; the URL is asked about again later
        asks.record("crawl", outcome)
        # Apply this answer to this decision (an allow-once is never remembered beyond it).
        now = self._at()
        once = AskLedger({"crawl": replace(outcome, cache_until=now + ASK_DECISION_WINDOW)})
        return policy.may_fetch(claim.url, self.bot, now, once), True

    async def _visit(self, claim: Claim, policy: SitePolicy) -> Visited:
        """Decide, fetch and commit one URL: ``"done"`` when its row is closed, ``"lost"``
        when the host is another process's now; otherwise (:class:`Later`, None) the
        URL goes back to the queue."""
        pattern = self.excluded_by(claim.url)
        if pattern is not None:  # queued by an earlier run without this --exclude
            why = f"excluded by --exclude {pattern}"
            self.store.refused(DecisionRecord(claim.url, claim.host, False, why, self.clock()))
            self.progress.excluded += 1
            return "done"
        decided = await self._decide(claim, policy)
        if not isinstance(decided, tuple):
            return decided
        decision, asked = decided
        if not decision.allowed:
            asks = self._asks[claim.host]
            opens = policy.next_allowed(claim.url, self.bot, self._at(), asks)
            if opens is not None:  # outside the visit window: wait for it, or come back later
                if not self.scheduler.wait_for_window(claim.host, opens.timestamp()):
                    return None
                decision = policy.may_fetch(claim.url, self.bot, opens, asks)
        if not decision.allowed:
            # asked again when its interval says: a policy file may change its mind
            previous = self.store.previous(claim.url)
            interval = next_interval(previous.interval if previous else None, changed=False)
            revisit = Revisit(self.clock() + interval, interval)
            self.store.refused(self._decision(claim, decision), revisit)
            self.progress.refused += 1
            return "done"
        self._reserved += 1
        try:
            # (after an ask, its answer holds for this request only: wait for the turn)
            sent = await self._request(claim.host, claim.url, policy, claimed=claim.url, wait=asked)
        finally:
            self._reserved -= 1
        if not isinstance(sent, Sent):
            return sent
        adapter = adapter_for(claim.host)
        if adapter.slows_down(sent.response.status):
            self._slowed()
            self.store.slowed_down(sent.record)
            self._queued += 1
            return "done"
        if sent.response.status is None or sent.response.cut:
            self._failed(claim, decision, sent.record)
            return "done"
        self._index(claim, decision, sent, policy, adapter)
        return "done"

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
