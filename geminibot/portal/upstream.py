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
- at most ``max_upstream`` requests in flight in all, ``max_upstream_per_client`` for one
  web client (:data:`WEB_CLIENT`) and ``max_upstream_per_address`` to one server address
  (many host names can point at one server), so no one client or capsule takes every slot;
- a web request never waits longer than ``max_wait`` for its turn: :class:`Busy` (503 with
  Retry-After) instead; no Gemini request takes longer than ``max_wait`` either (the
  client's ``total_timeout``), so a capsule that trickles holds a slot that long at most.

:meth:`Upstream.page` adds the site policy (obtained once per host as the core reads a
Gemini host, :func:`geminibot.policy.discovery.discover`, then cached for as long as RFC
9309 allows: at most 24 h; an unreachable robots.txt disallows everything for 10 minutes),
a ``webproxy`` decision before every hop and redirects within the client's limits. The
page cache (of rendered HTML) is the application's (:mod:`geminibot.portal.app`).
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import trio

from geminibot.classify.sources import fetch_policy_file
from geminibot.crawl.politeness import HostPace, Politeness
from geminibot.gemini.client import GeminiClient, Response
from geminibot.gemini.status import Family
from geminibot.gemini.tofu import KnownHosts, MemoryKnownHosts
from geminibot.gemini.urls import MAX_REQUEST_BYTES, SCHEME, parse_url
from geminibot.net.connect import ConnectRule, Resolver
from geminibot.net.dns import DnsCache
from geminibot.net.errors import ConnectionFailed, FetchError
from geminibot.net.guard import AddressGuard
from geminibot.net.limits import DEFAULT_CONNECT_TIMEOUT, Limits
from geminibot.net.redirects import RedirectRules, next_hop
from geminibot.policy import fetch_outcome
from geminibot.policy.discovery import POLICY_FETCH_BYTES, PolicyAnswer, discover
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
#: The web client (its rate key) on whose behalf the current task asks upstream.
WEB_CLIENT: ContextVar[str] = ContextVar("WEB_CLIENT", default="")


class Busy(Exception):
    """The capsule (or the portal) asks for a pause longer than a web request may wait."""

    def __init__(self, retry_after: float, reason: str) -> None:
        super().__init__(reason)
        self.retry_after = max(1.0, retry_after)
        self.reason = reason


class UpstreamRefused(Exception):
    """The portal will not connect there (scheme, address, or itself)."""


class NotReachable(Exception):
    """The address guard refused the host of ``url`` (the page never says which address
    the name resolved to)."""

    def __init__(self, url: URL) -> None:
        super().__init__(f"{url.host} is not reachable from this portal")
        self.url = url


class Refused(Exception):
    """The site policy keeps ``webproxy`` from ``url`` (the hop refused, after redirects)."""

    def __init__(self, decision: FetchDecision, url: URL, files: dict[str, bytes]) -> None:
        super().__init__(decision.reason)
        self.decision = decision
        self.url = url
        self.host = url.authority
        self.files = files


@dataclass
class CachedPolicy:
    """A capsule's site policy as the portal holds it, until it expires, with the files
    read."""

    policy: SitePolicy
    expires: float
    files: dict[str, bytes] = field(default_factory=dict)  # policy file name -> body


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
    """The Gemini client the policy discovery fetches with: every request it makes goes through the
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
    """The portal's Gemini client: fetches a capsule's pages within its policy, one
    request at a time per host, within slots per client and per address, paced, its
    policies cached."""

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
        self.pace = Politeness(
            clock,
            test_range=self.guard.test_range,
            max_wait=float("inf"),
            max_hosts=self.limits.paced_hosts,
        )
        self.slots = Slots(
            self.limits.max_upstream,
            self.limits.max_upstream_per_client,
            self.limits.max_upstream_per_address,
        )
        self._host_locks = KeyedLocks()
        self._policy_locks = KeyedLocks()
        self._routes: dict[tuple[str, int], tuple[str, int]] = {}
        wait = self.limits.max_wait
        timed = Limits(
            connect_timeout=min(wait, DEFAULT_CONNECT_TIMEOUT),
            header_timeout=wait,
            idle_timeout=wait,
            total_timeout=wait,
        )
        self.page_client = GeminiClient(
            known_hosts=self.known_hosts,
            limits=replace(timed, max_body_size=self.limits.max_body_bytes),
            connect_to=self.route,
            allow_scheme_switch=True,
            dns=self.guard.dns,  # it connects to the addresses the guard resolved
        )
        # policy files are read as the core reads them (POLICY_FETCH_BYTES, the rest cut)
        self.policy_client = _PolicyClient(
            self, replace(timed, max_body_size=POLICY_FETCH_BYTES, cut_body=True)
        )
        self.policies: OrderedDict[str, CachedPolicy] = OrderedDict()
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
        deadline = self.clock() + self.limits.max_wait
        slow_downs = 0
        while True:
            response = await self._in_turn(url, client, limits, deadline)
            if response.status != 44:
                return response
            slow_downs += 1
            if slow_downs > self.limits.max_slow_down_retries:
                at = self.pace.ready_at(host) or self.clock()
                raise Busy(at - self.clock(), self._pause_reason(host))

    async def _in_turn(
        self, url: URL, client: GeminiClient, limits: Limits, deadline: float
    ) -> Response:
        """The request, sent when the host's turn and a slot come (by ``deadline``)."""
        host = url.authority
        async with self._host_locks.hold(host, deadline) as held:
            if not held:
                raise Busy(self.limits.max_wait, f"too many requests for {host} are waiting")
            cached = self.policies.get(host)  # the pace, set again: a host idle for long
            self.pace.set_pace(host, self._host_delay(host, cached.policy if cached else None))
            at = self.pace.ready_at(host)  # may have been forgotten meanwhile (PACED_HOSTS)
            assert at is not None  # max_wait is infinite: never "skipped"
            if at > deadline:
                raise Busy(at - self.clock(), self._pause_reason(host))
            await trio.sleep_until(at)
            try:
                address = await self.guard.address(url.host, url.port)
            except UpstreamRefused:
                raise NotReachable(url) from None
            async with self.slots.hold(WEB_CLIENT.get(), address[0], deadline) as why:
                if why:
                    raise Busy(self.limits.max_wait, why)
                self._routes[(url.host, url.port)] = address
                try:
                    return await self._send(host, url, client, limits)
                finally:
                    del self._routes[(url.host, url.port)]

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
        cached = self._fresh_policy(host)
        if cached is not None:
            return cached
        async with self._policy_locks.hold(host, self.clock() + self.limits.max_wait) as held:
            if not held:
                raise Busy(self.limits.max_wait, f"the rules of {host} are being read")
            cached = self._fresh_policy(host)
            if cached is not None:
                return cached
            self.policy_client.seen[host] = []
            try:
                policy = await self._obtain(url)
            finally:
                seen = self.policy_client.seen.pop(host, [])
            cached = CachedPolicy(policy, self.clock() + _cache_seconds(seen), _bodies(seen))
            self.policies[host] = cached
            while len(self.policies) > self.limits.policy_cache_hosts:
                self.policies.popitem(last=False)
            return cached

    def _fresh_policy(self, host: str) -> CachedPolicy | None:
        cached = self.policies.get(host)
        if cached is None or cached.expires <= self.clock():
            return None
        self.policies.move_to_end(host)
        return cached

    async def _obtain(self, url: URL) -> SitePolicy:
        """THE one call that turns a Gemini host into a SitePolicy (switch it here): the
        core's discovery, robots.txt first; one that cannot be fetched disallows all."""

        async def fetch(target: str) -> PolicyAnswer:
            return await fetch_policy_file(self.policy_client, target)

        return await discover("gemini", f"gemini://{url.authority}/", fetch)

    def decide(self, url: URL, cached: CachedPolicy) -> FetchDecision:
        return cached.policy.may_fetch(str(url), self.bot, self.now_utc())

    # -- a page for a web user ---------------------------------------------------------

    async def allowed(self, url: URL) -> None:
        """Raise :class:`Refused` unless the site policy lets ``webproxy`` fetch ``url``."""
        cached = await self.site_policy(url)
        decision = self.decide(url, cached)
        if not decision.allowed:
            raise Refused(decision, url, cached.files)

    async def page(self, url: URL) -> Response:
        """The response to show for ``url``, each hop first :meth:`allowed`: raises
        :class:`Refused`, :class:`Busy`, :class:`NotReachable` or a FetchError when there
        is none to show. The caller sets :data:`WEB_CLIENT`."""
        return await self.follow(url, self.page_client, self.page_client.limits, check=self.allowed)

    def storable(self, response: Response) -> bool:
        """May the page be kept beyond the request (robots2.txt ``store``)?"""
        cached = self.policies.get(response.url.authority)
        return cached is None or cached.policy.usage_map(self.bot).get("store") not in NO_STORE


class KeyedLocks:
    """A lock per key, made when first wanted and dropped when no one holds or waits for
    it (so the keys a stranger names do not pile up)."""

    def __init__(self) -> None:
        self._locks: dict[str, trio.Lock] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, key: str, deadline: float) -> AsyncIterator[bool]:
        """Hold ``key``'s lock (True), or give up at ``deadline`` (False)."""
        lock = self._locks.setdefault(key, trio.Lock())
        held = False
        try:
            held = await _acquire_by(lock, deadline)
            yield held
        finally:
            if held:
                lock.release()
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(key, None)


class Slots:
    """Upstream slots: ``total`` in all, at most ``per_client`` for one web client and
    ``per_address`` to one server address, so that one client or one server (however
    many names it has) cannot take them all."""

    def __init__(self, total: int, per_client: int, per_address: int) -> None:
        self.total = total
        self.per_client = per_client
        self.per_address = per_address
        #: Slots held now.
        self.in_flight = 0
        self._held: dict[tuple[str, str], int] = {}  # (kind, key) -> slots held
        self._freed = trio.Event()

    def __len__(self) -> int:
        """Clients and addresses holding slots (none is remembered once it holds none)."""
        return len(self._held)

    def _refusal(self, client: str, address: str) -> str | None:
        if self.in_flight >= self.total:
            return "all the portal's upstream slots are busy"
        if self._held.get(("client", client), 0) >= self.per_client:
            return f"this portal already asks {self.per_client} pages for you at once"
        if self._held.get(("address", address), 0) >= self.per_address:
            return f"this portal already asks that server for {self.per_address} pages at once"
        return None

    @asynccontextmanager
    async def hold(self, client: str, address: str, deadline: float) -> AsyncIterator[str | None]:
        """A slot for ``client`` to ``address`` (None), or, at ``deadline``, why not."""
        why = self._refusal(client, address)
        with trio.move_on_at(deadline):
            while why is not None:
                await self._freed.wait()
                why = self._refusal(client, address)
        if why is not None:
            yield why
            return
        keys = (("client", client), ("address", address))
        self.in_flight += 1
        for key in keys:
            self._held[key] = self._held.get(key, 0) + 1
        try:
            yield None
        finally:
            self.in_flight -= 1
            for key in keys:
                self._held[key] -= 1
                if not self._held[key]:
                    del self._held[key]
            self._freed.set()
            self._freed = trio.Event()


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
