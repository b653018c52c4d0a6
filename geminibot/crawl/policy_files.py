"""A host's site policy as the crawler learns it, before its first page.

:mod:`geminibot.policy.discovery` names the files (robots.txt, robots2.txt and its chain,
agents.txt) and reads them; this module gets each one from the store's cache or, when the
cached copy has expired, with one request under the host's politeness schedule: a
slow-down (``44``, the web's 429 and 503) is waited out like any other and the file
asked again, never read as the file's answer (``geminibot why`` reads it from the
fetch log; the politeness schedule's back-off,
doubling with each 44 in a row, skips the host for now once it passes the longest wait),
and redirects are followed (RFC 9309 2.3.1.2: at least five, across hosts, within the
protocol). What the discovery made of the answer is cached for the next run. A read may
stop before a file whose turn has not come (:class:`Later`: the crawler gives the host
back to its scheduler), a file asked again after a slow-down included, and start again
at the host's next turn, the files read so far then from the cache; a redirect is sat
out.

A crawl that asks for it (``security_txt``: ``crawl --as researcher``, on Gemini
capsules) also reads the host's ``/.well-known/security.txt`` (RFC 9116) once its policy
is known and allows it: through the same path (the cache, the host's pace, the policy
files' size limit, the fetch log), read with the same outcomes, never part of the policy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from geminibot.crawl.adapters import FetchResult, adapter_for
from geminibot.crawl.politeness import MAX_WAIT
from geminibot.policy.discovery import PolicyAnswer, PolicyDiscovery, PolicyRequest, read_answer
from geminibot.policy.security_txt import SECURITY_TXT
from geminibot.policy.site_policy import Bot, Fetched, SitePolicy
from geminibot.store.crawlstore import CachedFile, CrawlStore, FetchRecord, cache_expiry
from geminibot.urls import URL, host_key, host_protocol, host_url, parse_url


@dataclass(frozen=True)
class Sent:
    """One request that was sent: the answer and its line of the fetch log."""

    response: FetchResult
    record: FetchRecord


@dataclass(frozen=True)
class Later:
    """The host's next request is not due yet: it comes at ``at`` (clock seconds)."""

    at: float


#: ``request(host, url, policy, resumable)``: one request in the host's turn (``policy``, as
#: far as it is known, sets the pace); None when the host is skipped for now. ``resumable``:
#: the request starts a file's fetch (no redirect followed yet) and
#: the files read before it stay cached for longer than any wait (``MAX_WAIT``), so the
#: read may stop there (:class:`Later`, when the host's turn has not come) and start
#: again at the host's next turn, those files then taken from the cache; otherwise the
#: request waits for its turn.
Request = Callable[[str, str, SitePolicy | None, bool], Awaitable[Sent | Later | None]]
#: ``wanted(host, policy)``: whether to read the host's security.txt, its policy known.
SecurityTxtWanted = Callable[[str, SitePolicy], bool]


def researcher_security_txt(bot: Bot, clock: Callable[[], float]) -> SecurityTxtWanted:
    """A researcher's reading of security.txt: on Gemini capsules (the census reports
    them; a web origin's is not read), when the capsule's policy lets ``bot`` fetch it."""

    def wanted(host: str, policy: SitePolicy) -> bool:
        if host_protocol(host) != "gemini":
            return False
        at = datetime.fromtimestamp(clock(), UTC)
        return policy.may_fetch(host_url(host, "/" + SECURITY_TXT), bot, at).allowed

    return wanted


@dataclass(frozen=True)
class Skip:
    """The host is skipped for now: a policy file is unreachable (``reason``), or the
    schedule said so (``reason`` None)."""

    reason: str | None = None


class PolicyFiles:
    """The crawler's reader of hosts' policy files: each host's site policy, from the
    store's cache while it is fresh, else fetched in discovery order."""

    def __init__(
        self,
        store: CrawlStore,
        clock: Callable[[], float],
        request: Request,
        on_slow_down: Callable[[], None],
        security_txt: SecurityTxtWanted | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.request = request
        self.on_slow_down = on_slow_down
        self.security_txt = security_txt
        #: host -> when the first of the files its policy was read from expires
        self.expires: dict[str, float] = {}
        #: host -> the bytes of the files its policy was last read from
        self.sizes: dict[str, int] = {}

    def expired(self, host: str) -> bool:
        """Whether the policy last read for ``host`` rests on a file whose cached copy
        has expired (RFC 9309 2.4: not used for more than 24 hours): read it again."""
        return self.clock() >= self.expires.get(host, float("inf"))

    async def site_policy(self, host: str) -> SitePolicy | Skip | Later:
        """The host's policy from its files, cached or fetched now, robots.txt first
        (:class:`Later`: read on at the host's next turn)."""
        discovery = PolicyDiscovery(host_protocol(host), host_url(host, "/"))
        known: SitePolicy | None = None  # what the files read so far say (pace)
        self.expires.pop(host, None)
        self.sizes[host] = 0
        expires = float("inf")
        while (request := discovery.next_request()) is not None:
            name = cache_name(host, request)
            cached = self.store.load_policy_file(host, name, self.clock())
            if cached is None:
                # the read may stop before this file while those before it stay cached
                resumable = expires >= self.clock() + MAX_WAIT
                read = discovery.receive
                got = await self._fetch(host, name, request.url, read, known, resumable)
                if got is None:
                    return Skip()
                if isinstance(got, Later):
                    return got
                cached = got
            else:
                discovery.receive(Fetched(cached.outcome, cached.body))
            expires = min(expires, cached.expires_at)
            self.expires[host] = expires
            self.sizes[host] += len(cached.body or b"")
            if not request.is_chain_link:
                if cached.outcome.kind == "unreachable":
                    # disallow everything until a later fetch succeeds: leave the URLs queued
                    return Skip(
                        f"{request.name} unreachable ({cached.outcome.reason}): retry later"
                    )
                known = discovery.result
        policy = discovery.result
        if self.security_txt is not None and self.security_txt(host, policy):
            got = await self._security_txt(host, policy, expires >= self.clock() + MAX_WAIT)
            if got is None:
                return Skip()
            if isinstance(got, Later):
                return got
        return policy

    async def _security_txt(
        self, host: str, policy: SitePolicy, resumable: bool
    ) -> CachedFile | Later | None:
        """The host's security.txt, from the cache or fetched now (not part of its policy:
        whatever came of it, the policy stands)."""
        cached = self.store.load_policy_file(host, SECURITY_TXT, self.clock())
        if cached is not None:
            return cached
        protocol = host_protocol(host)

        def read(answer: PolicyAnswer) -> Fetched:
            return read_answer(protocol, answer)

        url = host_url(host, "/" + SECURITY_TXT)
        return await self._fetch(host, SECURITY_TXT, url, read, policy, resumable)

    async def _fetch(
        self,
        host: str,
        name: str,
        url: str,
        read: Callable[[PolicyAnswer], Fetched],
        known: SitePolicy | None,
        resumable: bool,
    ) -> CachedFile | Later | None:
        """Fetch one file at ``url``, ``read`` the answer (the discovery's reading, for a
        policy file) and cache what it made of it under ``name``."""
        got = await self._follow(host, url, known, resumable)
        if got is None or isinstance(got, Later):
            return got
        sent, hops = got
        fetched = read(adapter_for(host).policy_answer(sent.response, hops))
        body = fetched.body if isinstance(fetched.body, bytes) else None
        now = self.clock()
        outcome, status = fetched.outcome, sent.response.status
        file = CachedFile(host, name, outcome, status, body, now, cache_expiry(now, outcome))
        self.store.save_policy_file(file, sent.record)
        return file

    async def _follow(
        self, host: str, url: str, known: SitePolicy | None, resumable: bool
    ) -> tuple[Sent, int] | Later | None:
        """Fetch a policy file at ``url``, sitting out slow-downs and following redirects
        -> (the last request, the redirects followed); None when the host is skipped."""
        adapter = adapter_for(host)
        hops = 0
        followed: list[URL] = []
        while True:
            sent = await self.request(host, url, known, resumable and hops == 0)
            if sent is None or isinstance(sent, Later):
                return sent
            if adapter.slows_down(sent.response.status):
                self.on_slow_down()
                self.store.log_fetch(sent.record)
                continue  # asked again once the politeness schedule's wait is over
            target = adapter.redirect_target(sent.response, url, followed)
            if target is None:
                return sent, hops
            self.store.log_fetch(sent.record)
            followed.append(parse_url(url))
            url, hops = str(target), hops + 1


def cache_name(host: str, request: PolicyRequest) -> str:
    """A policy file's key in the cache: its name, or a chain link's path on the host
    (its URL when it is on another host)."""
    if not request.is_chain_link:
        return request.name
    try:
        if host_key(request.url) == host:
            return parse_url(request.url).path_query.lstrip("/")
    except ValueError:
        pass
    return request.url
