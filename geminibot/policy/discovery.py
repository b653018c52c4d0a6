"""Learning a site's policy, without I/O: which files to fetch, and what they add up to.

:class:`PolicyDiscovery` is a small state machine in the manner of h11. It names the next
policy file to fetch (:meth:`~PolicyDiscovery.next_request`): robots.txt, robots2.txt and
the files its ``chain:`` names, then agents.txt. The caller fetches it however it fetches
(the crawler under its politeness schedule and cache, ``compare`` and ``classify
--against`` with the clients), following redirects itself, and hands back what came of it
(:meth:`~PolicyDiscovery.receive`): a :class:`PolicyAnswer` (status, meta or Location,
body, failure, redirects followed) or an already read :class:`Fetched`. When
``next_request()`` says None, :attr:`~PolicyDiscovery.result` is the :class:`SitePolicy`.

One reading for every tool:

* RFC 9309 2.3.1.2: redirects are followed by the transport (at least
  :data:`MAX_ROBOTS_REDIRECTS` hops, across authorities, within the site's protocol); a
  redirect handed back is one the transport could not follow (no usable target, another
  protocol, too many hops; HTTP 300, 304, 305): the file is *unavailable*, like a 4xx.
* :data:`MAX_POLICY_FILE_BYTES`: a transport reads at most this much of a policy file and
  cuts the rest (:data:`POLICY_FETCH_BYTES`, one byte more, so the parsers see that it was
  cut); an over-large file is read in part, never counted as unreachable.
* A robots2.txt chain is resolved against the site's own ``/robots2.txt`` URL (wherever a
  redirect led, so that a cached file reads the same) and followed on the site's own
  protocol (any host); a link to another protocol counts as a failed fetch, which ends the
  chain (:class:`ChainWalker`'s rules).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from geminibot.policy.outcomes import MAX_ROBOTS_REDIRECTS, fetch_outcome
from geminibot.policy.robots2 import ChainWalker, parse_robots2
from geminibot.policy.robots_parse import MAX_ROBOTS_BYTES
from geminibot.policy.site_policy import (
    AGENTS,
    ROBOTS,
    ROBOTS2,
    Fetched,
    SitePolicy,
)
from geminibot.urls import Scheme

#: The part of a policy file that is read (RFC 9309 2.5: at least 500 KiB) ...
MAX_POLICY_FILE_BYTES = MAX_ROBOTS_BYTES
#: ... and the most a transport fetches: one byte more, so a parser sees the file was cut.
POLICY_FETCH_BYTES = MAX_POLICY_FILE_BYTES + 1

__all__ = [
    "MAX_POLICY_FILE_BYTES",
    "MAX_ROBOTS_REDIRECTS",
    "POLICY_FETCH_BYTES",
    "PolicyAnswer",
    "PolicyDiscovery",
    "PolicyRequest",
    "discover",
    "parse_retry_after",
    "read_answer",
]


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """One policy file to fetch: ``name`` is robots.txt, robots2.txt, agents.txt or, for a
    robots2.txt chain link, the link's URL; ``url`` is what to fetch."""

    name: str
    url: str

    @property
    def is_chain_link(self) -> bool:
        return self.name not in (ROBOTS, ROBOTS2, AGENTS)


@dataclass(frozen=True, slots=True)
class PolicyAnswer:
    """What a transport got for a :class:`PolicyRequest`, redirects followed."""

    status: int | None
    #: Gemini's meta line, or HTTP's Location header (for a redirect).
    meta: str = ""
    body: bytes | None = None
    #: A connection, TLS or protocol failure (status None).
    failure: str | None = None
    #: Redirects the transport followed to get here.
    redirects: int = 0
    #: HTTP Retry-After in seconds (its delay form).
    retry_after: float | None = None


def read_answer(protocol: Scheme, answer: PolicyAnswer) -> Fetched:
    """The RFC 9309 reading of one answer; a redirect handed back (one the transport
    could not follow) is unavailable, as a 4xx is."""
    outcome = fetch_outcome(
        protocol,
        answer.status,
        meta=answer.meta,
        failure=answer.failure,
        redirects_followed=answer.redirects,
        retry_after=answer.retry_after,
    )
    if outcome.kind == "redirect":
        target = (outcome.location or "").strip()
        why = f"redirect to {target} not followed" if target else "redirect with no target"
        not_found = 51 if protocol == "gemini" else 404
        outcome = fetch_outcome(protocol, not_found, meta=f"status {answer.status}: {why}")
    body = answer.body if outcome.kind == "success" else None
    if body is not None and len(body) > POLICY_FETCH_BYTES:
        body = body[:POLICY_FETCH_BYTES]
    return Fetched(outcome, body)


def parse_retry_after(value: str | None) -> float | None:
    """HTTP Retry-After in seconds (its delay form; a date, or nothing, is None)."""
    text = (value or "").strip()
    return float(text) if text.isascii() and text.isdigit() else None


def same_protocol(protocol: Scheme, url: str) -> bool:
    """Whether ``url`` is a URL of ``protocol`` (http and https are one protocol)."""
    scheme = url.partition(":")[0].lower() if ":" in url else ""
    return scheme == "gemini" if protocol == "gemini" else scheme in ("http", "https")


class PolicyDiscovery:
    """The policy files of one site, in the order a bot reads them; see the module text.

    ``root`` is the site's root URL (``gemini://host/``, ``https://host/``)."""

    def __init__(self, protocol: Scheme, root: str) -> None:
        self.protocol: Scheme = protocol
        self.root = root if root.endswith("/") else root + "/"
        self.robots2_url = self.root + ROBOTS2
        self._files: dict[str, Fetched] = {}
        self._walker: ChainWalker | None = None
        #: robots.txt as received and its reading, parsed once however often
        #: :attr:`result` is asked (a bot asks after each file, for the pace).
        self._robots_read: tuple[Fetched, SitePolicy] | None = None
        self._chain: dict[str, bytes | None] = {}
        self._queue = [ROBOTS, ROBOTS2, AGENTS]
        self._pending: PolicyRequest | None = None
        #: The reading of the last answer received (what a cache keeps).
        self.last: Fetched | None = None
        self._advance()

    def _advance(self) -> None:
        while True:
            if self._walker is not None:
                link = self._walker.next_url()
                if link is None:
                    self._walker = None
                elif not same_protocol(self.protocol, link):
                    self._walker.feed(link, None)  # not this site's protocol: not fetched
                    self._chain[link] = None
                    continue
                else:
                    self._pending = PolicyRequest(link, link)
                    return
            if not self._queue:
                self._pending = None
                return
            name = self._queue.pop(0)
            self._pending = PolicyRequest(name, self.root + name)
            return

    def next_request(self) -> PolicyRequest | None:
        """The file to fetch next; None when every file has been received."""
        return self._pending

    def receive(self, answer: PolicyAnswer | Fetched) -> Fetched:
        """Hand over what came of :meth:`next_request`'s fetch; returns its reading."""
        request = self._pending
        if request is None:
            raise RuntimeError("no policy file is awaited: discovery is finished")
        fetched = answer if isinstance(answer, Fetched) else read_answer(self.protocol, answer)
        self.last = fetched
        success = fetched.outcome.kind == "success"
        if request.is_chain_link:
            assert self._walker is not None
            body = fetched.body if success and isinstance(fetched.body, bytes) else None
            self._chain[request.url] = body
            self._walker.feed(request.url, body)
        else:
            self._files[request.name] = fetched
            if request.name == ROBOTS2 and success:
                self._walker = ChainWalker(parse_robots2(fetched.body or b""), self.robots2_url)
        self._advance()
        return fetched

    @property
    def done(self) -> bool:
        return self._pending is None

    @property
    def result(self) -> SitePolicy:
        """The policy of what has been received so far (all of it once :attr:`done`)."""
        policy = SitePolicy.build(
            self.protocol,
            None,
            self._files.get(ROBOTS2),
            self._files.get(AGENTS),
            robots2_url=self.robots2_url,
            chain_fetch=self._chain,
        )
        robots = self._files.get(ROBOTS)
        if robots is not None:
            if self._robots_read is None or self._robots_read[0] is not robots:
                self._robots_read = (robots, SitePolicy.build(self.protocol, robots))
            read = self._robots_read[1]
            policy.robots, policy.ext20 = read.robots, read.ext20
        return policy


async def discover(
    protocol: Scheme, root: str, fetch: Callable[[str], Awaitable[PolicyAnswer]]
) -> SitePolicy:
    """Drive a :class:`PolicyDiscovery` with an injected ``fetch(url)`` (which follows
    redirects and never raises for the server's faults), one file after the other."""
    discovery = PolicyDiscovery(protocol, root)
    while (request := discovery.next_request()) is not None:
        discovery.receive(await fetch(request.url))
    return discovery.result


class PolicyUnreachable(Exception):
    """A site's robots.txt got no answer at all (nothing listening, TLS failed, ...): a
    tool that reports on the site's policy has nothing to report on. (The crawler reads
    the same fetch as RFC 9309 asks: everything disallowed until a later fetch works.)"""

    def __init__(self, url: str, failure: str) -> None:
        super().__init__(f"{url}: the policy could not be fetched: {failure}")
        self.url = url
        self.failure = failure


async def discover_reachable(
    protocol: Scheme, root: str, fetch: Callable[[str], Awaitable[PolicyAnswer]]
) -> SitePolicy:
    """:func:`discover`, raising :class:`PolicyUnreachable` when robots.txt got no answer."""
    robots_url = root + ROBOTS
    failures: dict[str, str] = {}

    async def recording(target: str) -> PolicyAnswer:
        answer = await fetch(target)
        if answer.status is None:
            failures[target] = answer.failure or "no answer"
        return answer

    site = await discover(protocol, root, recording)
    if robots_url in failures:
        raise PolicyUnreachable(robots_url, failures[robots_url])
    return site
