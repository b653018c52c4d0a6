"""The portal's Gemini side: which hosts it may reach, when, and what it may show.

Every Gemini request the portal makes goes through :meth:`Upstream.exchange`:

- the address guard (:class:`UpstreamGuard`): ``--connect-to`` rules first, then the name
  is resolved (through a :class:`~geminibot.net.dns.DnsCache`: once per ``DNS_TTL``, as
  the crawler does) and judged by the crawler's guard,
  :class:`geminibot.net.guard.AddressGuard`: without ``--test-range`` only public (global)
  addresses are reached, so the portal is no way into the machine's or the network's
  private services; with ``--test-range`` only loopback addresses are (local test
  capsules); the portal's own listening address never;
- per-host pacing with :class:`geminibot.crawl.politeness.Politeness` (one request in
  flight per host, the policy's delay for ``webproxy`` or :data:`~.limits.MIN_HOST_DELAY`,
  ``44`` back-off: the seconds in the meta or the doubling back-off, whichever is longer);
- at most ``max_upstream`` requests in flight in all;
- a web request never waits longer than ``max_wait`` for its turn: :class:`Busy` (503 with
  Retry-After) instead.

:meth:`Upstream.page` adds the site policy (obtained once per host with the project's
routine for Gemini hosts, :func:`geminibot.classify.sources.site_from_url`, then cached
for as long as RFC 9309 allows: at most 24 h), a ``webproxy`` decision before every hop,
redirects within the client's limits, and a short page cache.
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import trio

from geminibot.classify.sources import site_from_url
from geminibot.crawl.politeness import HostPace, Politeness
from geminibot.gemini.client import GeminiClient, Response
from geminibot.gemini.status import Family
from geminibot.gemini.tofu import KnownHosts, MemoryKnownHosts
from geminibot.gemini.urls import MAX_REQUEST_BYTES, SCHEME, parse_url
from geminibot.net.connect import ConnectRule, Resolver
from geminibot.net.dns import DnsCache
from geminibot.net.errors import ConnectionFailed, FetchError
from geminibot.net.guard import AddressGuard
from geminibot.net.limits import Limits
from geminibot.net.redirects import RedirectRules, next_hop
from geminibot.policy import fetch_outcome
from geminibot.policy.discovery import POLICY_FETCH_BYTES
from geminibot.policy.outcomes import MAX_CACHE_SECONDS
from geminibot.policy.site_policy import AGENTS, ROBOTS, ROBOTS2, Bot, FetchDecision, SitePolicy
from geminibot.portal.limits import PortalLimits
from geminibot.urls import URL, InvalidURL

#: The portal's product token (the crawler's: a ``User-agent: geminibot`` group speaks to
#: both) and the one virtual agent it acts as.
DEFAULT_AGENT = "geminibot"
VIRTUAL_AGENT = "webproxy"
#: robots2.txt ``store`` values that keep a host's pages out of the page cache.
NO_STORE = frozenset({"no", "session-only"})


class Busy(Exception):
    """The capsule (or the portal) asks for a pause longer than a web request may wait."""

    def __init__(self, retry_after: float, reason: str) -> None:
        super().__init__(reason)
        self.retry_after = max(1.0, retry_after)
        self.reason = reason


class UpstreamRefused(Exception):
    """The portal will not connect there (scheme, address, or itself)."""


class Refused(Exception):
    """The site policy keeps ``webproxy`` from the URL."""

    def __init__(self, decision: FetchDecision, host: str, files: dict[str, bytes]) -> None:
        super().__init__(decision.reason)
        self.decision = decision
        self.host = host
        self.files = files


@dataclass
class CachedPolicy:
    policy: SitePolicy
    expires: float
    files: dict[str, bytes] = field(default_factory=dict)  # policy file name -> body


@dataclass
class _CachedPage:
    response: Response
    expires: float


class UpstreamGuard:
    """Where the portal may connect for a Gemini host: the ``--connect-to`` rules, the
    name resolved once and the address pinned if :class:`~geminibot.net.guard.AddressGuard`
    allows it (public addresses, or loopback with ``--test-range``), never the portal
    itself."""

    def __init__(
        self,
        rules: list[ConnectRule] | None = None,
        *,
        test_range: bool = False,
        own: set[tuple[str, int]] | None = None,
        dns: DnsCache | None = None,
    ) -> None:
        self.resolver = Resolver(rules or [], loopback_only=False)
        self.test_range = test_range
        self.own: set[tuple[str, int]] = own if own is not None else set()
        advice = "; loopback and private addresses are reached only with --test-range (loopback)"
        self.check = AddressGuard(loopback_only=test_range, advice=advice)
        #: The portal's one DNS cache (its Gemini clients get it too).
        self.dns = dns if dns is not None else DnsCache()

    async def address(self, host: str, port: int) -> tuple[str, int]:
        name, to_port = self.resolver.address(host, port)
        try:
            ip = ipaddress.ip_address((await self.dns.resolve(name, to_port)).split("%")[0])
        except (OSError, UnicodeError) as exc:
            raise ConnectionFailed(f"cannot resolve {host}: {exc}") from None
        refusal = self.check.refusal(host, str(ip))
        if refusal is not None:
            raise UpstreamRefused(refusal)
        if (str(ip), to_port) in self.own or (
            ip.is_loopback and any(p == to_port and a in ("0.0.0.0", "::") for a, p in self.own)
        ):
            raise UpstreamRefused(f"{host}:{port} is this portal itself; no loops through it")
        return str(ip), to_port


class _PolicyClient(GeminiClient):
    """The Gemini client site_from_url is given: every request it makes goes through the
    portal's guard, pacing and limits, and is recorded (outcome and body) for the cache."""

    def __init__(self, upstream: Upstream, limits: Limits) -> None:
        super().__init__(
            known_hosts=upstream.known_hosts,
            limits=limits,
            connect_to=upstream.route,
            dns=upstream.guard.dns,
        )
        self.upstream = upstream
        self.seen: dict[str, list[tuple[str, int | None, bytes]]] = {}

    async def fetch(
        self, url: str | URL, *, follow_redirects: bool = True, limits: Limits | None = None
    ) -> Response:
        target = url if isinstance(url, URL) else parse_url(url)
        # only the files of a host whose policy is being built are kept (not a chain's
        # files on other hosts: nothing would ever collect them)
        record = self.seen.get(target.authority, [])
        try:
            response = await self.upstream.follow(
                target, self, limits or self.limits, follow=follow_redirects
            )
        except (FetchError, InvalidURL):
            record.append((target.path, None, b""))
            raise
        record.append((target.path, response.status, response.body))
        return response


class Upstream:
    def __init__(
        self,
        limits: PortalLimits | None = None,
        *,
        guard: UpstreamGuard | None = None,
        bot: Bot | None = None,
        known_hosts: KnownHosts | None = None,
        clock: Callable[[], float] = trio.current_time,
        wall_clock: Callable[[], float] | None = None,
    ) -> None:
        self.limits = limits or PortalLimits()
        self.guard = guard or UpstreamGuard()
        self.bot = bot or Bot(DEFAULT_AGENT, (VIRTUAL_AGENT,))
        self.known_hosts: KnownHosts = known_hosts or MemoryKnownHosts()
        self.clock = clock
        self.wall_clock = wall_clock
        self._wall_offset: float | None = None
        self.pace = Politeness(clock, max_wait=float("inf"))
        self._slots = trio.CapacityLimiter(self.limits.max_upstream)
        self._host_locks: dict[str, trio.Lock] = {}
        self._routes: dict[tuple[str, int], tuple[str, int]] = {}
        self.page_client = GeminiClient(
            known_hosts=self.known_hosts,
            limits=Limits(max_body_size=self.limits.max_body_bytes),
            connect_to=self.route,
            allow_scheme_switch=True,
            dns=self.guard.dns,  # it connects to the addresses the guard resolved
        )
        # policy files are read as the core reads them (POLICY_FETCH_BYTES, the rest cut)
        self.policy_client = _PolicyClient(
            self, Limits(max_body_size=POLICY_FETCH_BYTES, cut_body=True)
        )
        self.policies: OrderedDict[str, CachedPolicy] = OrderedDict()
        self._policy_locks: dict[str, trio.Lock] = {}
        self.pages: OrderedDict[str, _CachedPage] = OrderedDict()
        self._page_bytes = 0
        #: Gemini requests sent (for the status line and benchmarks).
        self.requests = 0

    # -- time --------------------------------------------------------------------------

    def now_utc(self) -> datetime:
        if self.wall_clock is not None:
            return datetime.fromtimestamp(self.wall_clock(), UTC)
        return datetime.now(UTC)

    # -- one request -------------------------------------------------------------------

    def route(self, host: str, port: int) -> tuple[str, int]:
        """The client's connect_to: the address the guard approved for this request."""
        found = self._routes.get((host, port))
        if found is None:
            raise ConnectionFailed(f"{host}:{port} was not checked by the portal's guard")
        return found

    def _host_delay(self, host: str, policy: SitePolicy | None) -> HostPace:
        if policy is not None:
            answer = policy.delay(self.bot, self.now_utc(), self.pace.state(host)[1])
            if answer.file:  # a policy file sets the pace: always obeyed
                return HostPace(delay=answer.seconds, between_starts=answer.between_starts)
        return HostPace(delay=self.limits.min_host_delay)

    async def exchange(self, url: URL, client: GeminiClient, limits: Limits) -> Response:
        """One request (no redirect followed), paced and guarded; 44s sat out within
        ``max_wait``, else :class:`Busy`."""
        host = url.authority
        cached = self.policies.get(host)
        self.pace.set_pace(host, self._host_delay(host, cached.policy if cached else None))
        deadline = self.clock() + self.limits.max_wait
        slow_downs = 0
        while True:
            self._routes[(url.host, url.port)] = await self.guard.address(url.host, url.port)
            lock = self._host_locks.setdefault(host, trio.Lock())
            if not await _acquire_by(lock, deadline):
                raise Busy(self.limits.max_wait, f"too many requests for {host} are waiting")
            try:
                at = self.pace.ready_at(host)
                assert at is not None  # max_wait is infinite: never "skipped"
                if at > deadline:
                    raise Busy(at - self.clock(), self._pause_reason(host))
                await trio.sleep_until(at)
                if not await _acquire_by(self._slots, deadline):
                    raise Busy(self.limits.max_wait, "all the portal's upstream slots are busy")
                try:
                    response = await self._send(host, url, client, limits)
                finally:
                    self._slots.release()
            finally:
                lock.release()
                if lock.statistics().tasks_waiting == 0 and not lock.locked():
                    self._host_locks.pop(host, None)
            if response.status != 44:
                return response
            slow_downs += 1
            if slow_downs > self.limits.max_slow_down_retries:
                at = self.pace.ready_at(host) or self.clock()
                raise Busy(at - self.clock(), self._pause_reason(host))

    def _pause_reason(self, host: str) -> str:
        slow_downs = self.pace.state(host)[3]
        if slow_downs:
            return f"{host} answered 44 SLOW DOWN: the portal waits before asking again"
        return f"{host} asks for a pause between requests (pacing)"

    async def _send(self, host: str, url: URL, client: GeminiClient, limits: Limits) -> Response:
        self.pace.start(host)
        started = self.clock()
        self.requests += 1
        status: int | None = None
        meta = ""
        try:
            response = await GeminiClient.fetch(client, url, follow_redirects=False, limits=limits)
            status, meta = response.status, response.meta
        finally:
            self.pace.finish(host, max(0.0, self.clock() - started), status, meta)
        return response

    async def follow(
        self,
        url: URL,
        client: GeminiClient,
        limits: Limits,
        *,
        follow: bool = True,
        check: Callable[[URL], Awaitable[None]] | None = None,
    ) -> Response:
        """Fetch ``url``, following redirects by the client's rules and limits; ``check``
        runs before every hop (the webproxy decision for pages)."""
        current = url
        redirects: list[URL] = []
        while True:
            if check is not None:
                await check(current)
            response = await self.exchange(current, client, limits)
            if response.family is not Family.REDIRECT or not follow:
                return replace(response, redirects=tuple(redirects))
            rules = RedirectRules(
                (SCHEME,),
                limits.max_redirects,
                switch_schemes=client.allow_scheme_switch,
                max_url_bytes=MAX_REQUEST_BYTES,
            )
            target = next_hop(current, response.header.redirect_target, redirects, rules)
            if target is None:  # to another scheme: the page says where, nothing follows
                return replace(response, redirects=tuple(redirects))
            redirects.append(current)
            current = target

    # -- the site policy ---------------------------------------------------------------

    async def site_policy(self, url: URL) -> CachedPolicy:
        """The host's policy, from the cache or obtained now (robots.txt first)."""
        host = url.authority
        lock = self._policy_locks.setdefault(host, trio.Lock())
        async with lock:
            cached = self.policies.get(host)
            if cached is not None and cached.expires > self.clock():
                self.policies.move_to_end(host)
                return cached
            self.policy_client.seen[host] = []
            try:
                policy = await self._obtain(url)
            finally:
                seen = self.policy_client.seen.pop(host, [])
            cached = CachedPolicy(policy, self.clock() + _cache_seconds(seen), _bodies(seen))
            self.policies[host] = cached
            self.policies.move_to_end(host)
            while len(self.policies) > self.limits.policy_cache_hosts:
                old, _ = self.policies.popitem(last=False)
                self._policy_locks.pop(old, None)
            return cached

    async def _obtain(self, url: URL) -> SitePolicy:
        """THE one call that turns a Gemini host into a SitePolicy (switch it here)."""
        return await site_from_url(str(url), self.policy_client)

    def decide(self, url: URL, cached: CachedPolicy) -> FetchDecision:
        return cached.policy.may_fetch(str(url), self.bot, self.now_utc())

    # -- a page for a web user ---------------------------------------------------------

    async def page(self, url: URL, *, cache: bool = True) -> Response:
        """The response to show for ``url``: raises :class:`Refused`, :class:`Busy`,
        :class:`UpstreamRefused` or a FetchError when there is none to show. With
        ``cache=False`` (the answer to an ``11`` prompt) nothing is read from or kept in
        the page cache."""

        async def check(hop: URL) -> None:
            cached = await self.site_policy(hop)
            decision = self.decide(hop, cached)
            if not decision.allowed:
                raise Refused(decision, hop.authority, cached.files)

        await check(url)
        key = str(url)
        hit = self.pages.get(key) if cache else None
        if hit is not None and hit.expires > self.clock():
            self.pages.move_to_end(key)
            return hit.response
        response = await self.follow(url, self.page_client, self.page_client.limits, check=check)
        if cache:
            self._remember(key, response)
        return response

    def _remember(self, key: str, response: Response) -> None:
        if response.family is not Family.SUCCESS or response.possibly_truncated:
            return
        cached = self.policies.get(response.url.authority)
        if cached is not None and cached.policy.usage_map(self.bot).get("store") in NO_STORE:
            return  # robots2.txt: nothing kept beyond the request
        size = len(response.body)
        if size > self.limits.page_cache_bytes:
            return
        old = self.pages.pop(key, None)
        if old is not None:
            self._page_bytes -= len(old.response.body)
        self.pages[key] = _CachedPage(response, self.clock() + self.limits.page_cache_seconds)
        self._page_bytes += size
        while self._page_bytes > self.limits.page_cache_bytes:
            _, gone = self.pages.popitem(last=False)
            self._page_bytes -= len(gone.response.body)


async def _acquire_by(lock: trio.Lock | trio.CapacityLimiter, deadline: float) -> bool:
    """Acquire ``lock`` at once if it is free, else wait for it until ``deadline``."""
    try:
        lock.acquire_nowait()
        return True
    except trio.WouldBlock:
        pass
    with trio.move_on_at(deadline):
        await lock.acquire()
        return True
    return False


def _cache_seconds(seen: list[tuple[str, int | None, bytes]]) -> float:
    """How long a policy built from these fetches may be used: RFC 9309's outcome of each
    (an unreachable file is retried soon), never more than 24 h."""
    seconds = MAX_CACHE_SECONDS
    for _, status, _ in seen:
        if status is not None and status // 10 == 3:
            continue  # a redirect hop: its target's outcome counts
        outcome = fetch_outcome("gemini", status, failure=None if status else "failed")
        seconds = min(seconds, outcome.cache_seconds)
    return seconds


def _bodies(seen: list[tuple[str, int | None, bytes]]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for path, status, body in seen:
        name = path.lstrip("/")
        if status is not None and status // 10 == 2 and name in (ROBOTS, ROBOTS2, AGENTS):
            files[name] = body
    return files
