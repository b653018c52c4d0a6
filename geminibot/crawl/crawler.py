"""The crawl loop: a trio nursery of per-host workers around the frontier, the politeness
schedule, the site policies and the index.

Per host, one worker: it first gets the host's robots.txt (from the cache, or fetched
under the same politeness rules as any request), then claims the host's queued URLs one
by one, checks each against the site policy for the declared bot (the decision is
recorded), waits its turn, fetches, and commits the page, its links and the new frontier
rows in one transaction. A shared :class:`trio.CapacityLimiter` bounds the requests in
flight across hosts (``concurrency``); a worker holds it only while its request runs.

The fetcher is injected (``fetch(url) -> Response``): the command line passes a
:class:`geminibot.crawl.fetcher.ProtocolFetcher` (Gemini and http(s)), tests may pass anything
that answers. Web hosts are crawled by the same loop (see :mod:`geminibot.crawl.schemes`
for their host keys): the fetcher is then also called with ``method`` and ``headers``
(``X-Agent-Identity`` when a robots2.txt says ``announce: yes``; the HEAD request of the
robots2 ask protocol when ``crawl: ask``), and 429 and 503 slow the host down as 44 does.
A crawl follows links only to the protocols of its seeds, plus those of ``follow``.

The clock is wall-clock time advanced by trio's clock, so the politeness state persisted in
the database stays meaningful across restarts, and tests under trio's mock clock do not
sleep.

Crash safety: see :mod:`geminibot.crawl.frontier`. Cancellation (Ctrl-C) releases the
leases of the requests it interrupts, so a stopped crawl resumes exactly where it was.
"""

from __future__ import annotations

import fnmatch
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Protocol

import trio

from geminibot import __version__
from geminibot.crawl import robots_cache
from geminibot.crawl.frontier import Claim, Frontier, Limits
from geminibot.crawl.page import extract, extract_web
from geminibot.crawl.politeness import HostPace, Politeness
from geminibot.crawl.schemes import (
    host_key,
    host_name,
    host_protocol,
    host_url,
    normalise,
    parse_any,
    protocol_of,
)
from geminibot.gemini.urls import MAX_REQUEST_BYTES
from geminibot.index import store_page, transaction
from geminibot.index.db import get_setting, set_setting
from geminibot.index.pages import find_by_hash
from geminibot.net.errors import FetchError
from geminibot.net.redirects import RedirectRules, next_hop
from geminibot.policy import fetch_outcome
from geminibot.policy.outcomes import MAX_ROBOTS_REDIRECTS
from geminibot.policy.robots2 import (
    AskLedger,
    AskOutcome,
    AskRequest,
    AskResponse,
    ChainWalker,
    ask_outcome,
    parse_robots2,
)
from geminibot.policy.site_policy import (
    AGENTS,
    ROBOTS,
    ROBOTS2,
    Bot,
    FetchDecision,
    Fetched,
    SitePolicy,
)
from geminibot.urls import URL, WEB_SCHEMES, Scheme

#: Requests in flight across all hosts, by default.
DEFAULT_CONCURRENCY = 16
#: The policy files read before the first page of a host, in this order (and the files a
#: robots2.txt ``chain:`` names on the same host, after it).
POLICY_FILES = (ROBOTS, ROBOTS2, AGENTS)
ROBOTS2_PATH = "/robots2.txt"
#: robots2.txt category each role declares (project decision; None: global directives only).
ROLE_CATEGORIES: dict[str, str | None] = {
    "indexer": "search-indexer",
    "archiver": None,
    "researcher": None,
}
#: Which redirects of a policy file are followed: on Gemini, same-host ones only; on the
#: web, across authorities too (RFC 9309 2.3.1.2). Five hops at most either way.
POLICY_REDIRECTS: dict[Scheme, RedirectRules] = {
    "gemini": RedirectRules(
        ("gemini",), MAX_ROBOTS_REDIRECTS, same_origin=True, max_url_bytes=MAX_REQUEST_BYTES
    ),
    "http": RedirectRules(WEB_SCHEMES, MAX_ROBOTS_REDIRECTS),
}
#: 44 SLOW DOWN answers to a policy file sat out (then retried) before it counts as
#: unreachable; a wait longer than the politeness bound skips the host at once.
MAX_POLICY_SLOW_DOWNS = 3
#: Resolution of the search for the opening of a visit window (seconds) ...
VISIT_WINDOW_STEP = 60.0
#: ... and how far ahead it looks (a window opens at least once a day).
VISIT_WINDOW_HORIZON = 24 * 3600.0
#: Seconds between two progress reports.
PROGRESS_INTERVAL = 0.5
#: Roles the crawler can declare (virtual user agents it acts as).
ROLES = ("indexer", "archiver", "researcher")
#: The crawler's own product token.
DEFAULT_AGENT = "geminibot"
#: HTTP statuses that ask a web crawler to slow down, as Gemini's 44 does.
WEB_SLOW_DOWN = frozenset({429, 503})
#: An ask answer is applied to the decision it was asked for during this long.
ASK_DECISION_WINDOW = timedelta(seconds=1)


@dataclass(frozen=True)
class Response:
    """What a fetcher returns: a status and meta, or an error (status None)."""

    status: int | None
    meta: str = ""
    body: bytes = b""
    error: str | None = None
    headers: tuple[tuple[str, str], ...] = ()  # http(s) response headers

    def header(self, name: str) -> str | None:
        low = name.lower()
        return next((v for k, v in self.headers if k.lower() == low), None)


#: ``fetch(url)``; for web URLs also ``fetch(url, method=..., headers=...)``.
Fetch = Callable[..., Awaitable[Response]]


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
    allow_hosts: tuple[str, ...] = ()  # fnmatch patterns; empty: the seeds' hosts
    concurrency: int = DEFAULT_CONCURRENCY
    test_range: bool = False
    follow: tuple[Scheme, ...] = ()  # protocols followed beyond the seeds' own


@dataclass
class Progress:
    """Live counters (this run) and a few gauges, for the progress display."""

    started: float
    pages: int = 0
    requests: int = 0
    errors: int = 0
    refused: int = 0
    slow_downs: int = 0
    queued: int = 0
    hosts_active: int = 0
    hosts_seen: int = 0
    hosts_skipped: dict[str, str] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def rate(self) -> float:
        return self.pages / self.elapsed if self.elapsed > 0 else 0.0


class ConfigMismatch(Exception):
    """The database was crawled with another role or agent; resuming would mix them."""


class Crawler:
    def __init__(
        self,
        conn: sqlite3.Connection,
        fetch: Fetch,
        options: CrawlOptions,
        *,
        archive: Archive | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.conn = conn
        self.fetch = fetch
        self.options = options
        self.archive = archive
        self.on_progress = on_progress
        self._wall0 = wall_clock()
        self._trio0: float | None = None
        self.frontier = Frontier(conn, self.clock, options.limits)
        self.politeness = Politeness(self.clock, test_range=options.test_range)
        self.lease = uuid.uuid4().hex
        self.progress = Progress(started=self._wall0)
        self.bot = Bot(
            options.agent,
            (options.role,),
            ROLE_CATEGORIES.get(options.role),
            options.strict,
            __version__,
        )
        self._patterns = tuple(p.lower() for p in options.allow_hosts)
        self._protocols: set[Scheme] = set(options.follow)
        self._asks: dict[str, AskLedger] = {}
        self._running: set[str] = set()
        self._skipped: dict[str, str] = {}
        self._wake = trio.Event()
        self._stopping = False
        self._reserved = 0
        self._opens: dict[str, float] = {}  # host -> when its visit window opens
        self._pages_before = 0
        self._limiter: trio.CapacityLimiter | None = None
        self._cancel: trio.CancelScope | None = None

    # --- time ---

    def clock(self) -> float:
        """Wall-clock seconds, advanced by trio's clock once the crawl runs."""
        if self._trio0 is None:
            return self._wall0
        return self._wall0 + (trio.current_time() - self._trio0)

    # --- setup ---

    def check_settings(self) -> None:
        """Refuse to resume a database crawled with another role or agent."""
        with transaction(self.conn):
            for key, value in (("role", self.options.role), ("agent", self.options.agent)):
                stored = get_setting(self.conn, key)
                if stored is None:
                    set_setting(self.conn, key, value)
                elif stored != value:
                    raise ConfigMismatch(
                        f"this database was crawled with {key} {stored!r}, not {value!r}: "
                        "use another --db or the same setting"
                    )

    def seed(self, urls: list[str]) -> dict[str, str]:
        """Queue the seeds (known ones stay as they are); without --allow-host patterns,
        the seeds' hosts are the crawl's hosts."""
        valid = []
        for url in urls:
            try:
                valid.append(host_key(url))
                self._protocols.add(protocol_of(url))
            except ValueError:
                pass
        if not self._patterns:
            self._patterns = tuple(sorted({host_name(key) for key in valid}))
        return self.frontier.seed(urls)

    def host_allowed(self, host: str) -> bool:
        """Whether a host key matches an --allow-host pattern (by key, or by host name
        alone, so a pattern covers the Gemini and web sides of a host)."""
        key = host.lower()
        name = host_name(key)
        return any(
            fnmatch.fnmatchcase(key, p) or fnmatch.fnmatchcase(name, p) for p in self._patterns
        )

    def _restore_hosts(self) -> None:
        with transaction(self.conn):
            self.conn.execute("UPDATE hosts SET skipped_reason = NULL")
        rows = self.conn.execute(
            "SELECT host, last_fetch_at, coalesce(last_duration, 0), not_before, slow_downs"
            " FROM hosts"
        ).fetchall()
        for host, last, duration, not_before, slow_downs in rows:
            self.politeness.restore(
                host,
                last_end=last,
                last_duration=duration,
                not_before=not_before,
                slow_downs=slow_downs,
            )

    # --- the run ---

    async def run(self) -> Progress:
        """Crawl until the frontier is empty (for the hosts that can go on), the page
        limit is reached, or :meth:`stop` is called. Returns the final counters."""
        self._trio0 = trio.current_time()
        self.check_settings()
        self.frontier.recover()
        self._restore_hosts()
        (self._pages_before,) = self.conn.execute("SELECT count(*) FROM pages").fetchone()
        self._limiter = trio.CapacityLimiter(max(1, self.options.concurrency))
        async with trio.open_nursery() as nursery:
            self._cancel = nursery.cancel_scope
            if self.on_progress is not None:
                nursery.start_soon(self._report_progress, self.on_progress)
            while not self._stopping:
                self._spawn(nursery)
                if not self._running:
                    break
                self._wake = trio.Event()
                await self._wake.wait()
            nursery.cancel_scope.cancel()
        self._update_progress()
        return self.progress

    def stop(self) -> None:
        """Stop now: interrupt requests in flight (their URLs go back to the queue)."""
        self._stopping = True
        if self._cancel is not None:
            self._cancel.cancel()

    def _spawn(self, nursery: trio.Nursery) -> None:
        if self._limit_reached():
            return
        for host in self.frontier.hosts_with_work():
            if host in self._running or host in self._skipped or not self.host_allowed(host):
                continue
            self._running.add(host)
            nursery.start_soon(self._worker, host)

    def _limit_reached(self) -> bool:
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
        p = self.progress
        p.elapsed = self.clock() - self._wall0
        p.queued = self.frontier.queued()
        p.hosts_active = len(self._running)
        p.hosts_seen = int(self.conn.execute("SELECT count(*) FROM hosts").fetchone()[0])
        p.hosts_skipped = dict(self._skipped)

    def _skip(self, host: str, reason: str) -> None:
        self._skipped[host] = reason
        with transaction(self.conn):
            self.conn.execute("UPDATE hosts SET skipped_reason = ? WHERE host = ?", (reason, host))

    # --- one host ---

    async def _worker(self, host: str) -> None:
        try:
            policy = await self._site_policy(host)
            if policy is None:
                return
            while not self._stopping and not self._limit_reached():
                claim = self.frontier.claim(host, self.lease)
                if claim is None:
                    return
                done = False
                try:
                    done = await self._visit(claim, policy)
                finally:
                    if not done:
                        with transaction(self.conn):
                            self.frontier.release(claim.url)
                skipped = self.politeness.skipped(host)
                if skipped:
                    self._skip(host, skipped)
                    return
        finally:
            self._running.discard(host)
            self._wake.set()

    async def _request(
        self,
        host: str,
        url: str,
        policy: SitePolicy | None = None,
        *,
        method: str = "GET",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> tuple[Response, float, float] | None:
        """Wait for the host's turn, then fetch; None if the host is skipped for now.

        ``policy`` sets the pace (with none, the default delay applies: the policy files
        themselves are fetched before it is known) and, on the web, whether to announce
        the bot. Returns (response, start, duration)."""
        web = host_protocol(host) == "http"
        assert self._limiter is not None
        if policy is not None:
            last_duration = self.politeness.state(host)[1]
            answer = policy.delay(self.bot, self._at(), last_duration, url)
            delay = answer.seconds if answer.file else None  # "": the rule of thumb
            opens = self._opens.pop(host, None)
            window = None if opens is None else (lambda t: max(t, opens))
            self.politeness.set_pace(host, HostPace(delay=delay, window_opens=window))
        while True:
            at = self.politeness.ready_at(host)
            if at is None:
                return None
            wait = at - self.clock()
            if wait <= 0:
                break
            await trio.sleep(wait)
        async with self._limiter:
            self.politeness.start(host)
            started = self.clock()
            response: Response | None = None
            try:
                if web:
                    given = {name.lower() for name, _ in headers}
                    sent = headers + tuple(
                        h for h in self._announce(policy) if h[0].lower() not in given
                    )
                    response = await self.fetch(url, method=method, headers=sent)
                else:
                    response = await self.fetch(url)
            except Exception as exc:  # a fetcher should not raise; count it as a failure
                response = Response(None, error=f"{type(exc).__name__}: {exc}")
            finally:
                duration = max(0.0, self.clock() - started)
                status, meta = (None, "") if response is None else (response.status, response.meta)
                self.politeness.finish(
                    host, duration, status, meta, slow_down=self._slows_down(host, status)
                )
        self.progress.requests += 1
        if response.status is None:
            self.progress.errors += 1
        return response, started, duration

    def _announce(self, policy: SitePolicy | None) -> tuple[tuple[str, str], ...]:
        """``X-Agent-Identity`` when the host's robots2.txt says ``announce: yes``."""
        if policy is None or policy.robots2 is None:
            return ()
        setting = policy.robots2.setting("announce", self.bot.category)
        if setting is None or setting.value != "yes":
            return ()
        return (("X-Agent-Identity", self.bot.identity),)

    @staticmethod
    def _slows_down(host: str, status: int | None) -> bool:
        if host_protocol(host) == "http":
            return status in WEB_SLOW_DOWN
        return status == 44

    def _log_fetch(self, host: str, url: str, got: tuple[Response, float, float]) -> None:
        response, started, duration = got
        last_end, last_duration, not_before, slow_downs = self.politeness.state(host)
        self.conn.execute(
            "INSERT INTO fetches (url, host, status, meta, error, started_at, duration)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (url, host, response.status, response.meta, response.error, started, duration),
        )
        self.conn.execute(
            "UPDATE hosts SET last_fetch_at = ?, last_duration = ?, not_before = ?,"
            " slow_downs = ? WHERE host = ?",
            (last_end, last_duration, not_before, slow_downs, host),
        )

    async def _site_policy(self, host: str) -> SitePolicy | None:
        """The host's policy from robots.txt, robots2.txt (and its chain) and agents.txt
        (cached, or fetched now, robots.txt first); None when the host is skipped for now."""
        files: dict[str, Fetched] = {}
        chain: dict[str, bytes | None] = {}
        known: SitePolicy | None = None  # what the files read so far say (pace)
        for name in POLICY_FILES:
            cached = await self._policy_file(host, name, known)
            if cached is None:
                return None
            if cached.outcome.kind == "unreachable":
                # disallow everything until a later fetch succeeds: leave the URLs queued
                self._skip(host, f"{name} unreachable ({cached.outcome.reason}): retry later")
                return None
            files[name] = Fetched(cached.outcome, cached.body)
            if name == ROBOTS2 and cached.outcome.kind == "success":
                walker = ChainWalker(parse_robots2(cached.body or b""), ROBOTS2_PATH)
                while (target := walker.next_url()) is not None:
                    body = None
                    path = _same_host_path(target, host)
                    if path is not None:  # a chain is followed on its own host only
                        link = await self._policy_file(host, path.lstrip("/"), known)
                        if link is None:
                            return None
                        body = link.body if link.outcome.kind == "success" else None
                    chain[target] = body
                    walker.feed(target, body)
            known = SitePolicy.build(
                host_protocol(host),
                files.get(ROBOTS),
                files.get(ROBOTS2),
                files.get(AGENTS),
                robots2_url=ROBOTS2_PATH,
                chain_fetch=chain,
            )
        return known

    async def _policy_file(
        self, host: str, name: str, known: SitePolicy | None
    ) -> robots_cache.CachedFile | None:
        """A policy file from the cache, or fetched now; None when the host is skipped."""
        cached = robots_cache.load(self.conn, host, name, self.clock())
        if cached is None:
            cached = await self._fetch_policy_file(host, name, known)
        return cached

    async def _fetch_policy_file(
        self, host: str, name: str, known: SitePolicy | None
    ) -> robots_cache.CachedFile | None:
        """Fetch /NAME, following same-host redirects; cache and return the outcome."""
        url = host_url(host, f"/{name}")
        protocol = host_protocol(host)
        hops = slow_downs = 0
        redirected: list[URL] = []
        while True:
            got = await self._request(host, url, known)
            if got is None:
                self._skip(host, self.politeness.skipped(host) or "skipped")
                return None
            with transaction(self.conn):
                self._log_fetch(host, url, got)
            response = got[0]
            if self._slows_down(host, response.status):
                self.progress.slow_downs += 1
                slow_downs += 1
                if slow_downs <= MAX_POLICY_SLOW_DOWNS:
                    continue  # the politeness schedule sits out the wait first
            outcome = fetch_outcome(
                protocol,
                response.status,
                meta=response.meta,
                failure=response.error,
                redirects_followed=hops,
                retry_after=_retry_after(response) if protocol == "http" else None,
            )
            if outcome.kind == "redirect":
                current = parse_any(url)
                try:
                    target = next_hop(
                        current, outcome.location, redirected, POLICY_REDIRECTS[protocol]
                    )
                except FetchError as exc:
                    target, refused = None, str(exc)
                else:
                    refused = f"{current} redirects to {outcome.location!r}"
                if target is not None:
                    redirected.append(current)
                    url, hops = str(target), hops + 1
                    continue
                outcome = fetch_outcome(
                    protocol, 51 if protocol == "gemini" else 404, meta=f"not followed: {refused}"
                )
            body = response.body if outcome.kind == "success" else None
            with transaction(self.conn):
                return robots_cache.save(
                    self.conn, host, name, self.clock(), outcome, response.status, body
                )

    def _at(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def _window_opens(self, policy: SitePolicy, url: str) -> float | None:
        """For a URL refused now: the first time within :data:`VISIT_WINDOW_HORIZON` at
        which the policy would allow it (a visit window opening), or None."""
        now = self.clock()
        for step in range(1, int(VISIT_WINDOW_HORIZON // VISIT_WINDOW_STEP) + 1):
            at = now + step * VISIT_WINDOW_STEP
            if policy.may_fetch(url, self.bot, datetime.fromtimestamp(at, UTC)).allowed:
                return at
        return None

    def _record_decision(self, claim: Claim, decision: FetchDecision) -> None:
        self.conn.execute(
            "INSERT INTO decisions (url, host, allowed, reason, at) VALUES (?, ?, ?, ?, ?)",
            (claim.url, claim.host, int(decision.allowed), decision.reason, self.clock()),
        )

    async def _ask(
        self, claim: Claim, policy: SitePolicy, request: AskRequest
    ) -> AskOutcome | None:
        """Perform the robots2 ask exchange (HEAD) for ``claim``'s host; log the request.
        None when the host is skipped for now."""
        url = host_url(claim.host, request.target)
        got = await self._request(
            claim.host, url, policy, method=request.method, headers=request.headers
        )
        if got is None:
            return None
        response = got[0]
        with transaction(self.conn):
            self._log_fetch(claim.host, url, got)
        return ask_outcome(AskResponse(response.status, response.headers), self._at())

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
        decided = await self._decide(claim, policy)
        if decided is None:
            with transaction(self.conn):
                self.frontier.release(claim.url)
            return True
        decision = decided
        if not decision.allowed and any(
            "Visit-time" in f"{r.rule} {r.text}" for r in decision.reasons if not r.allowed
        ):
            opens = self._window_opens(policy, claim.url)
            if opens is not None:  # outside the visit window: wait for it, or come back later
                self._opens[claim.host] = opens
                if self.politeness.ready_at(claim.host) is None:
                    return False
                decision = policy.may_fetch(
                    claim.url,
                    self.bot,
                    datetime.fromtimestamp(opens, UTC),
                    self._asks[claim.host],
                )
        if not decision.allowed:
            with transaction(self.conn):
                self._record_decision(claim, decision)
                self.frontier.finish(claim.url, "refused", decision.reason)
            self.progress.refused += 1
            return True
        self._reserved += 1
        try:
            got = await self._request(claim.host, claim.url, policy)
        finally:
            self._reserved -= 1
        if got is None:
            return False
        response, started, _duration = got
        if self._slows_down(claim.host, response.status):
            self.progress.slow_downs += 1
            with transaction(self.conn):
                self._log_fetch(claim.host, claim.url, got)
                self.frontier.release(claim.url)
            return True
        if response.status is None:
            with transaction(self.conn):
                self._record_decision(claim, decision)
                self._log_fetch(claim.host, claim.url, got)
                self.frontier.finish(claim.url, "failed", response.error)
            return True
        fetched_at = started
        if host_protocol(claim.host) == "http":
            extracted = extract_web(
                claim.url,
                claim.host,
                response.status,
                response.meta,
                response.body,
                fetched_at,
                response.header("x-robots-tag") or "",
            )
        else:
            extracted = extract(
                claim.url, claim.host, response.status, response.meta, response.body, fetched_at
            )
        page, links = extracted.page, extracted.links
        if page.content_hash is not None:
            original = find_by_hash(self.conn, page.content_hash, page.url)
            if original is not None:
                page, links = replace(page, duplicate_of=original, links=()), ()
        keeps_copies = _may_store(policy, self.bot)
        if not keeps_copies:
            # robots2.txt store: no / session-only: nothing of the content is persisted;
            # the index keeps the page's metadata and links only, and no WARC record.
            page = replace(page, title="", headings=(), text=None)
        if self.archive is not None and keeps_copies:
            self.archive.write(claim.url, response, fetched_at)
        woke = False
        with transaction(self.conn):
            self._record_decision(claim, decision)
            self._log_fetch(claim.host, claim.url, got)
            for raw in links:
                try:
                    link, target_host = normalise(raw), host_key(raw)
                    followed = protocol_of(raw) in self._protocols
                except ValueError:
                    continue  # neither gemini:// nor http(s)://, or a broken URL
                if not followed or not self.host_allowed(target_host):
                    continue
                added = self.frontier.add(link, claim.depth + 1, claim.url)
                woke = woke or (added == "queued" and target_host not in self._running)
            store_page(self.conn, page, self.options.role)
            self.frontier.finish(claim.url, "done")
        self.progress.pages += 1
        if woke:
            self._wake.set()
        return True


#: robots2.txt ``store`` values under which no content may be persisted.
NO_STORE_VALUES = frozenset({"no", "session-only"})


def _may_store(policy: SitePolicy, bot: Bot) -> bool:
    """Whether the host's robots2.txt lets ``bot`` keep what it fetched."""
    return policy.usage_map(bot).get("store") not in NO_STORE_VALUES


def _same_host_path(target: str, host: str) -> str | None:
    """The path and query of ``target`` (a path, or a URL) if it is on ``host``."""
    if target.startswith("/"):
        return target
    try:
        return parse_any(target).path_query if host_key(target) == host else None
    except ValueError:
        return None


def _retry_after(response: Response) -> float | None:
    """HTTP Retry-After in seconds (the delay form; a date counts as absent)."""
    value = (response.header("retry-after") or "").strip()
    return float(value) if value.isascii() and value.isdigit() else None
