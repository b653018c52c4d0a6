"""The portal's ``/census``: the latest census kept in the crawl database (``geminibot
census --keep``) as the HTML report of ``census --html``, its charts inline as ``data:``
images (the page's Content-Security-Policy allows images from ``data:`` and nothing
else more), with the figures kept over time.

The censuses are read on a database read slot; the charts are drawn in a worker thread;
the page is kept :data:`CENSUS_SECONDS` and made once for all who ask meanwhile."""

from __future__ import annotations

from functools import partial

import trio

from geminibot.census.history import kept_censuses
from geminibot.census.html import build_report, data_uri, report_body
from geminibot.census.model import Census
from geminibot.portal.pages import HTTPResponse, Pages
from geminibot.store.database import Database
from geminibot.store.reads import Reads

#: Seconds the page is kept (as the search capsule's ``/census``).
CENSUS_SECONDS = 600.0


def read_censuses(database: Database) -> list[Census]:
    """The whole-crawl censuses kept in ``database``, oldest first."""
    return kept_censuses(database)


def census_html(censuses: list[Census]) -> str | None:
    """The report of the latest of ``censuses`` (its history: all of them), as the body of
    a portal page; None when no census is kept."""
    if not censuses:
        return None
    return report_body(build_report(censuses[-1], censuses), data_uri)


#: The page's body when no census is kept.
NONE_KEPT = (
    "<h1>Census</h1>\n<p>No census of the crawl is kept yet: <code>geminibot census "
    "--db PATH --keep</code> keeps one, and this page shows the latest.</p>\n"
)


async def census_page(pages: Pages, reads: Reads, drawers: trio.CapacityLimiter) -> HTTPResponse:
    """The page: the censuses read with ``reads``, the charts drawn in a worker thread
    (one of ``drawers``). Raises :class:`~geminibot.store.reads.ReadsBusy`."""
    censuses = await reads.run(read_censuses)
    body = await trio.to_thread.run_sync(partial(census_html, censuses), limiter=drawers)
    if body is None:
        return pages.html(200, "Census", NONE_KEPT)
    return pages.html(200, "Census of Geminispace", body, inline_images=True)
