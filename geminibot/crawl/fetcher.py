"""The crawler's edge: the Gemini client as a ``fetch(url) -> FetchResult`` function, and the
protocol-dispatching fetcher that adds the http(s) client (:class:`ProtocolFetcher`). The
address overrides (``--connect-to``) and the loopback guard (``--test-range``) are
:mod:`geminibot.net.connect`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from geminibot.crawl.adapters import WEB_SLOW_DOWN, Fetch, FetchResult
from geminibot.gemini.client import GeminiClient
from geminibot.http.client import WebClient, WebResponse
from geminibot.net.errors import FetchError
from geminibot.net.limits import Limits
from geminibot.urls import InvalidURL, scheme_of

#: The crawl's clients cut a body at their size limit instead of failing; a page cut there
#: counts as failed. A policy file's fetch sets a lower limit of its own (``max_body``:
#: :data:`~geminibot.policy.discovery.POLICY_FETCH_BYTES`, one byte past what is kept).
CRAWL_LIMITS = Limits(cut_body=True)


def body_limits(limits: Limits, max_body: int | None) -> Limits:
    """``limits``, the body cut at ``max_body`` bytes when given."""
    return limits if max_body is None else replace(limits, max_body_size=max_body, cut_body=True)


def _cut(body: bytes, limits: Limits) -> str | None:
    """The error of a body the client cut at its size limit, else None."""
    if limits.cut_body and len(body) >= limits.max_body_size:
        return f"BodyTooLarge: body is larger than {limits.max_body_size} bytes"
    return None


def gemini_fetch(client: GeminiClient) -> Fetch:
    """The client as a crawler fetcher: one request, redirects returned, not followed; the
    body read up to ``max_body`` bytes when given."""

    async def fetch(url: str, *, max_body: int | None = None) -> FetchResult:
        limits = body_limits(client.limits, max_body)
        try:
            response = await client.fetch(url, follow_redirects=False, limits=limits)
        except (FetchError, InvalidURL) as exc:
            return FetchResult(None, error=f"{type(exc).__name__}: {exc}")
        cut = _cut(response.body, limits)
        return FetchResult(
            response.status,
            response.meta,
            response.body,
            cut,
            cut=cut is not None,
            tls=response.tls,
        )

    return fetch


def web_meta(response: WebResponse) -> str:
    if 300 <= response.status <= 399:
        return response.header("location") or ""
    if 200 <= response.status <= 299:
        return response.content_type
    if response.status in WEB_SLOW_DOWN:
        retry = response.header("retry-after")
        if retry is not None:
            return retry.strip()
    return response.reason


class ProtocolFetcher:
    """One crawler fetcher for both protocols, dispatching on the URL's scheme.

    ``gemini`` is a fetcher such as :func:`gemini_fetch` gives, ``web`` the http(s) client;
    a protocol without one answers with an error response. For the web, ``meta`` holds
    the ``Location`` of a 3xx, the ``Content-Type`` of a 2xx, the ``Retry-After`` of a 429
    or 503 (when given), else the reason phrase; ``headers`` are the response headers. No
    redirect is followed: the crawler decides each hop."""

    def __init__(self, *, gemini: Fetch | None = None, web: WebClient | None = None):
        self.gemini = gemini
        self.web = web

    async def __call__(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Sequence[tuple[str, str]] = (),
        max_body: int | None = None,
    ) -> FetchResult:
        try:
            protocol = scheme_of(url)
        except ValueError as exc:
            return FetchResult(None, error=f"{type(exc).__name__}: {exc}")
        if protocol == "gemini":
            if self.gemini is None:
                return FetchResult(None, error="this crawl has no Gemini client")
            return await self.gemini(url, max_body=max_body)
        if self.web is None:
            return FetchResult(None, error="this crawl has no http(s) client")
        limits = body_limits(self.web.limits, max_body)
        try:
            w = await self.web.fetch(
                url, method=method, headers=headers, follow_redirects=False, limits=limits
            )
        except (FetchError, InvalidURL) as exc:
            return FetchResult(None, error=f"{type(exc).__name__}: {exc}")
        cut = _cut(w.body, limits)
        return FetchResult(
            w.status, web_meta(w), w.body, cut, headers=w.headers, cut=cut is not None
        )
