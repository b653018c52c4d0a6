"""The portal's ``/census``: the latest census kept in the crawl database (``geminibot
census --keep``) as the HTML report of ``census --html``, its charts inline as ``data:``
images (the page's Content-Security-Policy allows images from ``data:`` and nothing
else more), with the figures kept over time.

The censuses are read on a database read slot; the charts are drawn in a worker thread;
the page is kept :data:`CENSUS_SECONDS` and made once for all who ask meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import trio

from geminibot.census.model import Census
from geminibot.portal.pages import HTTPResponse, Pages
from geminibot.store.reads import Periodic, Reads, ReadsBusy

#: Seconds the page is kept (as the search capsule's ``/census``).
CENSUS_SECONDS = 600.0


def census_html(censuses: list[Census]) -> str | None:
    """The report of the latest of ``censuses`` (its history: all of them), as the body of
    a portal page; None when no census is kept."""
    if not censuses:
        return None
    from geminibot.census.html import build_report, data_uri, report_body  # (see _fresh)

    return report_body(build_report(censuses[-1], censuses), data_uri)


#: The page's body when no census is kept.
NONE_KEPT = (
    "<h1>Census</h1>\n<p>No census of the crawl is kept yet: <code>geminibot census "
    "--db PATH --keep</code> keeps one, and this page shows the latest.</p>\n"
)


class CensusPage:
    """``/census`` of a portal: its :class:`~geminibot.portal.pages.Pages`, the worker
    threads that draw (``drawers``), its clock for the period."""

    def __init__(
        self, pages: Pages, drawers: trio.CapacityLimiter, clock: Callable[[], float]
    ) -> None:
        self.pages = pages
        self.drawers = drawers
        self._kept: Periodic[HTTPResponse] = Periodic(CENSUS_SECONDS, clock, _succeeded)

    async def answer(self, reads: Reads, _request: object) -> HTTPResponse:
        """The page (kept for the period), or 503 when no database read slot was free."""
        try:
            return await self._kept.get(lambda: self._fresh(reads))
        except ReadsBusy as exc:
            return self.pages.busy(str(exc), exc.retry_after, "/census")

    async def _fresh(self, reads: Reads) -> HTTPResponse:
        # The censuses' reads (SQLAlchemy) and their report: imported by the first /census,
        # not at start (the portal starts fast).
        from geminibot.census.history import kept_censuses

        censuses = await reads.run(kept_censuses)
        body = await trio.to_thread.run_sync(partial(census_html, censuses), limiter=self.drawers)
        if body is None:
            return self.pages.html(200, "Census", NONE_KEPT)
        return self.pages.html(200, "Census of Geminispace", body, inline_images=True)


def _succeeded(page: HTTPResponse) -> bool:
    """Whether a page is kept for the period (a failure is not)."""
    return page.status == 200
