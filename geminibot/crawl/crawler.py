"""The crawl engine: a fixed set of trio workers that moves hosts and URLs between the
crawl's parts, as Scrapy's engine does: the store (:mod:`~geminibot.store.crawlstore`), the
scheduler (:mod:`~geminibot.crawl.scheduler`: which host is due next), the downloader
(:mod:`~geminibot.crawl.downloader`), the hosts' site policies
(:mod:`~geminibot.crawl.site_policies`, read from their files:
:mod:`~geminibot.crawl.policy_files`), the scope (:mod:`~geminibot.crawl.scope`) and a
claimed URL's visit (:mod:`~geminibot.crawl.visit`, committing what
:mod:`~geminibot.crawl.pipeline` makes of the answer).

Each of ``concurrency`` workers takes a host, makes one request for it (a policy file
until its policy is known, then one of its queued URLs) and gives it back with the time
its next request is due (its lease and policy kept), or drops it when it has nothing
more for this run. Cancellation (Ctrl-C) puts the URLs being visited back in the queue:
a stopped crawl resumes where it was (:mod:`~geminibot.store.frontier`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass

import trio

from geminibot.crawl.clock import Clock
from geminibot.crawl.downloader import Downloader
from geminibot.crawl.policy_files import Later, PolicyFiles, Skip
from geminibot.crawl.progress import Progress
from geminibot.crawl.scheduler import Scheduler
from geminibot.crawl.scope import CrawlScope
from geminibot.crawl.settings import CrawlOptions, check_settings
from geminibot.crawl.site_policies import SitePolicies
from geminibot.crawl.visit import Visited, Visitor
from geminibot.policy.site_policy import SitePolicy
from geminibot.store.crawlstore import CrawlStore
from geminibot.store.freshness import DAY, LOG_RETENTION_DAYS

__all__ = ["CrawlParts", "Crawler"]

#: Seconds between two progress reports.
PROGRESS_INTERVAL = 0.5
#: Seconds a crawl process with nothing to do waits before it looks again at the hosts
#: other processes sharing the store hold, when every one of them is leased (no polling
#: while they work); a dead process's host is taken over at most this long late.
HELD_BACKOFF = 5.0
#: Seconds it waits when some of those hosts are free now (their holder let them go),
#: before it takes them: a host another process is taking at that instant is then its.
HELD_FREE_PAUSE = 0.1


async def _own_address(host: str) -> str:
    return host


@dataclass(frozen=True)
class CrawlParts:
    """The parts a crawler moves work between (built by
    :func:`geminibot.crawl.build.build_crawler`), sharing one lease and one set of
    counters."""

    lease: str  # this process among those sharing the store; the WARC run's name
    progress: Progress
    scheduler: Scheduler
    scope: CrawlScope
    downloader: Downloader
    visitor: Visitor
    policy_files: PolicyFiles


class Crawler:
    """The crawl engine: workers that take hosts from the scheduler, read each host's
    site policy, and visit its URLs one request at a time; ``clients`` (the network
    clients, if the crawl opens them) are open while it runs."""

    def __init__(
        self,
        store: CrawlStore,
        options: CrawlOptions,
        parts: CrawlParts,
        *,
        clock: Clock,
        on_progress: Callable[[Progress], None] | None = None,
        address_of: Callable[[str], Awaitable[str]] | None = None,
        clients: AbstractAsyncContextManager[object] | None = None,
        poll_due: float | None = None,
    ) -> None:
        self.store = store
        #: Seconds between two looks at the store for URLs that became due during the run
        #: (a continuous crawl's: ``geminibot recheck``); None: the run takes only those due
        #: at its start.
        self.poll_due = poll_due
        self.options = options
        self.on_progress = on_progress
        #: Where a host key's requests go (``address port N``): hosts that share one are
        #: paced as one as well (see :mod:`geminibot.crawl.scheduler`).
        self.address_of = address_of if address_of is not None else _own_address
        self.clients = clients
        self._clock = clock
        self.lease = parts.lease
        self.progress = parts.progress
        self.scheduler = parts.scheduler
        self.scope = parts.scope
        self.downloader = parts.downloader
        self.visitor = parts.visitor
        self._leased: set[str] = set()  # hosts this process works on (leased)
        self._addressed: set[str] = set()  # hosts whose address the scheduler knows
        self._capped = False  # hosts were left out for --max-hosts: look again later
        self._policies = SitePolicies(parts.policy_files)  # of hosts between turns
        self._skipped: dict[str, str] = {}
        self._stopping = False
        self._visiting = 0  # URLs being visited now (pages that may meet --max-pages)
        self._visited = trio.Event()  # set when a visit ends
        self._queued = 0  # URLs queued, kept up to date in memory for the display
        self._pages_before = 0
        self._cancel: trio.CancelScope | None = None
        self._due_added = False  # URLs came due during this round of workers
        self._newest = 0  # the newest URL id looked at (``poll_due``): a newer one is new

    def clock(self) -> float:
        """Wall-clock seconds (by default advanced by trio's clock once the crawl runs)."""
        return self._clock.now()

    def seed(self, urls: list[str]) -> dict[str, str]:
        """Queue the seeds (known ones stay as they are). The seeds' hosts are always the
        crawl's hosts; --allow-host patterns add others."""
        return self.store.seed(self.scope.add_seeds(urls))

    # --- the run ---

    async def run(self) -> Progress:
        """Crawl until the frontier is empty (for the hosts that can go on), the page
        limit is reached, or :meth:`stop` is called. Returns the final counters; what the
        store holds back is committed however the run ends (see
        :class:`~geminibot.store.crawlstore.SqliteStore`)."""
        try:
            async with self.clients if self.clients is not None else nullcontext():
                return await self._run()
        finally:
            self.store.end_run()

    async def _run(self) -> Progress:
        self._clock.start()
        check_settings(self.store, self.options)
        self.store.recover()
        now = self.clock()
        self.store.prune_logs(now - LOG_RETENTION_DAYS * DAY)
        self.progress.revisits = self.store.revisit(now, self.options.refresh)
        if self.poll_due is not None:  # (URLs queued by others after it: new work)
            self._newest = self.store.newest_url()
        self.scheduler.restore(self.store.host_states(), self.store.hosts_with_work())
        self._pages_before = self.store.count_pages()
        self._queued = self.store.queued()
        max_time = self.options.max_time
        with trio.move_on_after(math.inf if max_time is None else max_time) as timer:
            async with trio.open_nursery() as nursery:
                self._cancel = nursery.cancel_scope
                if self.on_progress is not None:
                    nursery.start_soon(self._report_progress, self.on_progress)
                if self.poll_due is not None:
                    nursery.start_soon(self._take_due, self.poll_due)
                await self._rounds()
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
        self.progress.newest_url = self._newest
        return self.progress

    async def _rounds(self) -> None:
        """The workers, until no host has work (here, elsewhere, or come due meanwhile
        with ``poll_due``), a limit is met or the crawl is stopped."""
        while not self._stopping and not self._limit_met():
            self._due_added = False
            async with trio.open_nursery() as workers:
                for _ in range(self.options.concurrency):
                    workers.start_soon(self._worker)
            if self.poll_due is not None:
                self._queue_due()  # (what came due as the last host ended)
            if self._due_added:
                continue
            if not await self._await_held_work():
                return

    async def _take_due(self, every: float) -> None:
        """Every ``every`` seconds, queue the URLs that became due during the run (made
        due by ``geminibot recheck``, or their revisit time come), take the URLs new to
        the store (``/submit``), and hand their hosts to the scheduler, which paces them
        as any (a host not met yet: its policy files first)."""
        while not self._stopping:
            await trio.sleep(every)
            self._queue_due()

    def _queue_due(self) -> None:
        """Queue the URLs due now and give their hosts to the scheduler, with the hosts of
        the URLs others queued since the last look (new to the store: a ``/submit``,
        another process's links); each host's turn then asks its scope, lease and policy."""
        if self._stopping:
            return
        woken = self.store.revisit_due(self.clock())
        newest = self.store.newest_url()  # (read first: a URL queued meanwhile is newer)
        new = self.scheduler.add_new_hosts(self.store.queued_since(self._newest))
        self._newest = newest
        if woken:
            self.progress.revisits += sum(woken.values())
            self.scheduler.add_work(woken)
        self._queued += sum(woken.values()) + sum(new.values())
        self._due_added = self._due_added or bool(woken or new)

    async def _await_held_work(self) -> bool:
        """No host has work here: wait for work that other crawl processes sharing the
        store hold (their hosts come free when they finish or their leases expire).
        False when there is none for this crawl."""
        if self._limit_reached():
            return False
        held = {
            host: wait
            for host, wait in self.store.work_elsewhere(self.lease).items()
            if host not in self._skipped and self.scope.host_allowed(host)
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
        """... or may once the URLs being visited are done."""
        limit = self.options.max_pages
        if limit is None:
            return False
        return self._pages_before + self.progress.pages + self._visiting >= limit

    async def _report_progress(self, report: Callable[[Progress], None]) -> None:
        while True:
            self._update_progress()
            report(self.progress)
            await trio.sleep(PROGRESS_INTERVAL)

    def _update_progress(self) -> None:
        """Gauges from counters kept in memory (no query of the store per repaint)."""
        p = self.progress
        p.elapsed = self.clock() - p.started
        p.queued = self._queued
        p.hosts_active = len(self._leased)
        p.hosts_seen = self.scheduler.hosts_with_work()
        p.hosts_skipped = dict(self._skipped)
        p.in_flight_limit = self.options.concurrency
        waiting = self.scheduler.next_due()
        now = self.clock()
        p.next_request = None if waiting is None else (waiting[0], max(0.0, waiting[1] - now))

    def _skip(self, host: str, reason: str) -> None:
        self._skipped[host] = reason
        self.store.skip_host(host, reason)

    # --- one host ---

    async def _worker(self) -> None:
        """Take the host due next, make its next request, give it back; until no host
        has work, or --max-pages is met (the worker then ends the crawl)."""
        while not self._limit_met():
            if self._limit_reached():  # the visits under way may meet it: wait for them
                if self._visited.is_set():
                    self._visited = trio.Event()
                await self._visited.wait()
                continue
            host = await self.scheduler.next_host()
            if host is None:
                return
            if self._limit_reached():  # met while this worker waited for a host
                self.scheduler.give_back(host, self.clock())
                continue
            due = await self._turn(host)
            if due is None:
                self._let_go(host)
            else:
                self.scheduler.give_back(host, due)
        # A limit met ends the crawl: no policy file fetch, no 44 sat out for a page
        # that will not be fetched (the requests in flight go back to the queue).
        self.progress.limit = "--max-pages"
        if self._cancel is not None:
            self._cancel.cancel()

    async def _turn(self, host: str) -> float | None:
        """One turn of ``host``: its site policy (a policy file read, or from memory),
        then one of its URLs -> when its next request is due, or None when it is done
        for this run (queue empty, skipped, another process holds it, --max-hosts)."""
        if self._stopping or host in self._skipped or not self.scope.host_allowed(host):
            return None
        if not await self._lease(host):
            return None
        if self.scheduler.slot_taken(host):  # another host of its address is out
            return self.clock()
        requests = self.progress.requests
        policy = await self._policies.for_turn(host)
        if isinstance(policy, Skip):
            self._skip(host, policy.reason or self.scheduler.skipped(host) or "skipped")
            return None
        if isinstance(policy, Later):
            return policy.at
        # (the scheduler handed the host out due; a policy file fetched now used its turn)
        due = self._due(host) if self.progress.requests != requests else self.clock()
        if due is not None and due <= self.clock():
            due = await self._next_url(host, policy)
        if due is not None:
            self._policies.keep(host, policy)
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
        self._policies.drop(host)
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
        self._visiting += 1
        outcome: Visited = None  # (a cancelled visit: the URL goes back to the queue)
        try:
            outcome = await self.visitor.visit(claim, policy)
        except Exception:
            # The URL stays leased, its attempt counted if its request was sent: the
            # next run's recovery gives it up after MAX_URL_ATTEMPTS such ends.
            outcome = "lost"
            raise
        finally:
            self._visiting -= 1
            self._visited.set()
            if outcome is None or isinstance(outcome, Later):
                self.store.release(claim.url)
                self._queued += 1
                self.scheduler.released(host)
        woken = self.visitor.woken()
        if woken:
            self._queued += sum(woken.values())
            self.scheduler.add_work(woken)
        if outcome == "lost":  # another crawl process took the host: the claim is theirs
            return None
        if isinstance(outcome, Later):
            return outcome.at
        skipped = self.scheduler.skipped(host)
        if skipped:
            self._skip(host, skipped)
            return None
        return self._due(host)
