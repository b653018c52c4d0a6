"""The crawler's fetcher: one callable that dispatches on the URL's scheme.

``ProtocolFetcher(gemini=GeminiClient(...), web=WebClient(...))`` is a
:data:`geminibot.crawl.crawler.Fetch`: ``await fetcher(url)`` gives a crawler
:class:`~geminibot.crawl.crawler.Response` for a ``gemini://`` or ``http(s)://`` URL, never
raises for a failed fetch (the error becomes ``Response.error``), and follows no redirect
(the crawler decides each hop against the site policy and records it).

What ``meta`` holds for the web, so the crawler reads both protocols alike: the
``Location`` of a 3xx, the ``Content-Type`` of a 2xx, the ``Retry-After`` of a 429 or 503
(when given), else the reason phrase. ``headers`` are the response headers (the web only).
A protocol without a client answers with an error response.
"""

from __future__ import annotations

from collections.abc import Sequence

from geminibot.crawl.crawler import Response
from geminibot.crawl.schemes import protocol_of
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.errors import GeminiError
from geminibot.http.client import WebClient, WebResponse
from geminibot.http.errors import WebError

#: HTTP statuses read as "slow down" (the web's 44): Retry-After is their wait.
SLOW_DOWN_STATUSES = frozenset({429, 503})


def web_meta(response: WebResponse) -> str:
    if 300 <= response.status <= 399:
        return response.header("location") or ""
    if 200 <= response.status <= 299:
        return response.content_type
    if response.status in SLOW_DOWN_STATUSES:
        retry = response.header("retry-after")
        if retry is not None:
            return retry.strip()
    return response.reason


class ProtocolFetcher:
    def __init__(self, *, gemini: GeminiClient | None = None, web: WebClient | None = None):
        self.gemini = gemini
        self.web = web

    async def __call__(
        self, url: str, *, method: str = "GET", headers: Sequence[tuple[str, str]] = ()
    ) -> Response:
        try:
            protocol = protocol_of(url)
        except ValueError as exc:
            return Response(None, error=f"{type(exc).__name__}: {exc}")
        if protocol == "gemini":
            if self.gemini is None:
                return Response(None, error="this crawl has no Gemini client")
            try:
                g = await self.gemini.fetch(url, follow_redirects=False)
            except GeminiError as exc:
                return Response(None, error=f"{type(exc).__name__}: {exc}")
            return Response(g.status, g.meta, g.body)
        if self.web is None:
            return Response(None, error="this crawl has no http(s) client")
        try:
            w = await self.web.fetch(url, method=method, headers=headers, follow_redirects=False)
        except WebError as exc:
            return Response(None, error=f"{type(exc).__name__}: {exc}")
        return Response(w.status, web_meta(w), w.body, headers=w.headers)
