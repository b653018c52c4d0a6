"""What differs between crawling a Gemini host and a web host, one adapter per protocol.

The crawl loop asks the host's :class:`Adapter` how to send a request (the web adds the
bot's headers and may use HEAD), whether an answer means "slow down" (Gemini's 44, the
web's 429 and 503), what an answer says as a policy-file fetch (status, redirect target,
Retry-After) and what a page contributes to the index. The loop itself has no protocol
branches.

The fetcher is injected: ``fetch(url) -> FetchResult``; for web URLs also ``fetch(url,
method=..., headers=...)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar

from geminibot.crawl.page import Extracted, extract, extract_web
from geminibot.gemini.client import TLSSeen
from geminibot.gemini.urls import MAX_REQUEST_BYTES
from geminibot.net.errors import FetchError
from geminibot.net.redirects import RedirectRules, next_hop
from geminibot.policy.discovery import MAX_ROBOTS_REDIRECTS, PolicyAnswer, parse_retry_after
from geminibot.urls import URL, WEB_SCHEMES, Scheme, host_protocol, parse_url

#: HTTP statuses that ask a web crawler to slow down, as Gemini's 44 does.
WEB_SLOW_DOWN = frozenset({429, 503})
#: Which redirects of a policy file are followed (RFC 9309 2.3.1.2: at least five, even
#: across authorities), within the protocol; another scheme is handed back (unavailable).
POLICY_REDIRECTS: dict[Scheme, RedirectRules] = {
    "gemini": RedirectRules(
        ("gemini",), MAX_ROBOTS_REDIRECTS, switch_schemes=True, max_url_bytes=MAX_REQUEST_BYTES
    ),
    "http": RedirectRules(WEB_SCHEMES, MAX_ROBOTS_REDIRECTS, switch_schemes=True),
}


@dataclass(frozen=True)
class FetchResult:
    """What a fetcher returns: a status and meta, or an error (status None)."""

    status: int | None
    meta: str = ""
    body: bytes = b""
    error: str | None = None
    headers: tuple[tuple[str, str], ...] = ()  # http(s) response headers
    #: The body was cut at the fetcher's size limit (``error`` says so): a policy file is
    #: read in part, a page counts as a failed fetch.
    cut: bool = False
    #: What the connection showed of its TLS and certificate (Gemini).
    tls: TLSSeen | None = None

    def header(self, name: str) -> str | None:
        low = name.lower()
        return next((v for k, v in self.headers if k.lower() == low), None)


#: ``fetch(url, max_body=N)`` (``N``: the bytes of the body read at most, the rest cut
#: off; None: the fetcher's own limit); for web URLs also ``method=`` and ``headers=``.
Fetch = Callable[..., Awaitable[FetchResult]]
Headers = tuple[tuple[str, str], ...]


class Adapter(ABC):
    """What the crawler asks of a protocol: sending a request, reading its answer (a
    redirect, a slow-down, a policy file, a page's text and links). What both protocols
    do alike is written here, given each one's ``protocol``, :meth:`request_options`,
    :meth:`is_redirect`, :meth:`retry_after`, :meth:`slows_down` and :meth:`extract`."""

    protocol: ClassVar[Scheme]

    async def send(
        self,
        fetch: Fetch,
        url: str,
        *,
        method: str,
        headers: Headers,
        announce: Headers,
        max_body: int | None = None,
    ) -> FetchResult:
        """One request; ``announce`` is what the bot says about itself when the site
        asks it to (robots2.txt ``announce: yes``), for protocols that carry headers;
        ``max_body`` the bytes of the body read at most (None: the fetcher's limit)."""
        return await fetch(
            url, max_body=max_body, **self.request_options(method, headers, announce)
        )

    def request_options(
        self, method: str, headers: Headers, announce: Headers
    ) -> dict[str, object]:
        """The fetcher's keywords besides the URL and ``max_body``: none for a protocol
        without methods or headers."""
        return {}

    @abstractmethod
    def slows_down(self, status: int | None) -> bool:
        """Whether the answer asks the bot to slow down."""

    @abstractmethod
    def is_redirect(self, status: int) -> bool:
        """Whether the status is a redirect."""

    def retry_after(self, response: FetchResult) -> float | None:
        """The seconds the answer asks the bot to wait (None: it names none)."""
        return None

    def redirect_target(self, response: FetchResult, url: str, followed: list[URL]) -> URL | None:
        """For a redirect, the URL to follow (:data:`POLICY_REDIRECTS`: across hosts,
        within the protocol, at most five hops, no loop), else None (handed back)."""
        if response.status is None or not self.is_redirect(response.status):
            return None
        try:
            return next_hop(
                parse_url(url), response.meta, followed, POLICY_REDIRECTS[self.protocol]
            )
        except (FetchError, ValueError):
            return None

    def policy_answer(self, response: FetchResult, redirects: int) -> PolicyAnswer:
        """A policy file's answer; a body cut at the size limit is read in part."""
        return PolicyAnswer(
            response.status,
            response.meta,
            response.body,
            response.error if response.status is None else None,
            redirects=redirects,
            retry_after=self.retry_after(response),
        )

    @abstractmethod
    def extract(self, url: str, host: str, response: FetchResult, fetched_at: float) -> Extracted:
        """The page and links of a response that has a status."""


class GeminiAdapter(Adapter):
    """The :class:`Adapter` for gemini:// URLs (44 is a slow-down, 3x a redirect, no
    headers)."""

    protocol: ClassVar[Scheme] = "gemini"

    def slows_down(self, status: int | None) -> bool:
        return status == 44

    def is_redirect(self, status: int) -> bool:
        return status // 10 == 3

    def extract(self, url: str, host: str, response: FetchResult, fetched_at: float) -> Extracted:
        assert response.status is not None
        return extract(url, host, response.status, response.meta, response.body, fetched_at)


class WebAdapter(Adapter):
    """http(s): ``meta`` holds the ``Location`` of a 3xx (see the crawl's fetcher)."""

    protocol: ClassVar[Scheme] = "http"

    def request_options(
        self, method: str, headers: Headers, announce: Headers
    ) -> dict[str, object]:
        """The method, and the headers with what the bot announces that they do not
        already name."""
        given = {name.lower() for name, _ in headers}
        sent = headers + tuple(h for h in announce if h[0].lower() not in given)
        return {"method": method, "headers": sent}

    def slows_down(self, status: int | None) -> bool:
        return status in WEB_SLOW_DOWN

    def is_redirect(self, status: int) -> bool:
        return 300 <= status <= 399

    def retry_after(self, response: FetchResult) -> float | None:
        return parse_retry_after(response.header("retry-after"))

    def extract(self, url: str, host: str, response: FetchResult, fetched_at: float) -> Extracted:
        assert response.status is not None
        return extract_web(
            url,
            host,
            response.status,
            response.meta,
            response.body,
            fetched_at,
            response.header("x-robots-tag") or "",
        )


ADAPTERS: dict[Scheme, Adapter] = {"gemini": GeminiAdapter(), "http": WebAdapter()}


def adapter_for(host: str) -> Adapter:
    """The adapter of a host key's protocol."""
    return ADAPTERS[host_protocol(host)]
