"""Gemini pages as the portal shows them (:class:`PageProxy`): the ``webproxy`` rules
asked first (:class:`~geminibot.portal.upstream.Upstream`), even for a page in the cache;
then the page from the :class:`~geminibot.portal.cache.PageCache`, or fetched once for
all who ask for it at once, rendered (:class:`~geminibot.portal.pages.Pages`, in a
worker thread when the body is big) and kept in the cache when it may be. Every failure
(a refusal, a busy upstream, an unreachable or too large page) is a page.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import trio

from geminibot.gemini.client import Response
from geminibot.gemini.status import Family
from geminibot.gemini.urls import parse_url
from geminibot.net.errors import BodyTooLarge, FetchError
from geminibot.portal.cache import PageCache
from geminibot.portal.pages import HTTPResponse, Pages
from geminibot.portal.render import Strip
from geminibot.portal.upstream import WEB_CLIENT, Busy, NotReachable, Refused, Upstream
from geminibot.urls import URL, InvalidURL

#: Bodies up to this size are rendered on the event loop (a few milliseconds at most);
#: bigger ones in a worker thread.
INLINE_RENDER_BYTES = 64 * 1024


class PageProxy:
    """Shows Gemini pages in web browsers: through ``upstream``, as ``pages`` renders
    them, kept in its page cache (times by ``clock``)."""

    def __init__(self, upstream: Upstream, pages: Pages, clock: Callable[[], float]) -> None:
        self.upstream = upstream
        self.pages = pages
        self.clock = clock
        limits = upstream.limits
        self.limits = limits
        self.cache = PageCache(limits.page_cache_bytes, limits.page_cache_seconds)
        self.renderers = trio.CapacityLimiter(limits.render_threads)
        #: Pages being fetched and rendered now, by URL: who asks meanwhile waits.
        self._fetching: dict[str, trio.Event] = {}

    async def show(self, url: URL, client: str = "", *, hide_query: bool = False) -> HTTPResponse:
        """The page for ``url``; with ``hide_query`` (the answer to an ``11`` prompt)
        neither shown nor cached."""
        token = WEB_CLIENT.set(client)  # whose share of the upstream slots it takes
        try:
            return await self._show(url, hide_query)
        finally:
            WEB_CLIENT.reset(token)

    async def _show(self, url: URL, hide_query: bool) -> HTTPResponse:
        shown = _without_query(url) if hide_query else str(url)
        try:
            if hide_query:
                return await self._fresh(url, hide_query=True)
            await self.upstream.allowed(url)  # the rules first, even for a cached page
            return await self._shared(url)
        except Refused as refused:
            hop = parse_url(_without_query(refused.url)) if hide_query else refused.url
            return self.pages.refusal(hop, refused.decision, refused.files)
        except Busy as busy:
            return self.pages.busy(busy.reason, busy.retry_after, shown)
        except NotReachable as exc:
            return self.pages.not_reachable(exc.url, shown)
        except BodyTooLarge as exc:
            return self.pages.too_large(str(exc), shown)
        except (FetchError, InvalidURL) as exc:
            return self.pages.fetch_failed(type(exc).__name__, str(exc), shown)

    async def _shared(self, url: URL) -> HTTPResponse:
        """The page from the cache, else fetched and rendered once for all who ask for it
        meanwhile (they wait up to ``max_wait`` for the first, then try themselves)."""
        key = str(url)
        first = self._fetching.get(key)
        if first is not None:
            with trio.move_on_after(self.limits.max_wait):
                await first.wait()
        hit = self.cache.get(key, self.clock())
        if hit is not None:
            return hit
        mine = self._fetching[key] = trio.Event()
        try:
            return await self._fresh(url, hide_query=False)
        finally:
            mine.set()
            if self._fetching.get(key) is mine:
                del self._fetching[key]

    async def _fresh(self, url: URL, *, hide_query: bool) -> HTTPResponse:
        """Fetched and rendered now (and kept in the cache when it may be)."""
        response = await self.upstream.page(url)
        final = _without_query(response.url) if hide_query else str(response.url)
        strip = Strip(
            final, response.certificate, response.trust.value, response.previous_certificate
        )
        result = await self._render(response, strip)
        if hide_query:  # nothing of the answer to an 11 prompt kept by the browser
            result.headers.append((b"cache-control", b"no-store"))
        elif (
            response.family is Family.SUCCESS
            and not response.possibly_truncated
            and self.upstream.storable(response)
        ):
            self.cache.put(str(url), result, self.clock())
        return result

    async def _render(self, response: Response, strip: Strip) -> HTTPResponse:
        if len(response.body) <= INLINE_RENDER_BYTES:
            return self.pages.response(response, strip)
        return await trio.to_thread.run_sync(
            partial(self.pages.response, response, strip), limiter=self.renderers
        )


def _without_query(url: URL) -> str:
    return str(url).split("?", 1)[0]
