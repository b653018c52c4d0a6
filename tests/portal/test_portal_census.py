"""The portal's ``/census``: the latest census kept as the HTML report, its charts inline
as ``data:`` images (the one page whose CSP allows them), drawn once a period for all
who ask; a page that says how to keep one when none is; only with a crawl database."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from census_report_store import START, fill
from portal_fixtures import browser

from geminibot.census.figures import take_census
from geminibot.census.history import keep
from geminibot.portal.app import PortalApp
from geminibot.portal.census import CENSUS_SECONDS
from geminibot.portal.limits import PortalLimits
from geminibot.portal.render import CSP
from geminibot.portal.upstream import Upstream, UpstreamGuard
from geminibot.store.database import Database
from geminibot.store.db import connect
from geminibot.why.reads import CheckReads


def app_of(db: Path | None) -> PortalApp:
    limits = PortalLimits(rate_per_second=100.0, rate_burst=100)
    app = PortalApp(Upstream(limits, guard=UpstreamGuard(test_range=True)))
    if db is not None:
        app.checks = CheckReads.of(str(db))
    return app


async def test_census_page_kept_for_its_period(
    tmp_path: Path, loopback_clock: trio.testing.MockClock
) -> None:
    """The page made when no census was kept is kept for the period though one is kept
    meanwhile; after it, the census is drawn (one: its bars, no series to draw)."""
    db = tmp_path / "crawl.db"
    fill(db, weeks=1, kept=False)
    app = app_of(db)
    async with browser(app) as web:
        first = await web.get("/census")
        conn = connect(db)
        database = Database(db.name, conn, path=db)
        keep(database, take_census(database, START + 30 * 86_400))
        conn.close()
        again = await web.get("/census")
        await trio.sleep(CENSUS_SECONDS + 1)
        later = await web.get("/census")
    assert app.checks is not None
    app.checks.reads.close()
    assert first.status_code == 200 and "No census of the crawl is kept yet" in first.text
    assert again.text == first.text  # within the period: the page made once
    assert later.status_code == 200  # after it: made again, with the census kept
    csp = later.headers["content-security-policy"]
    assert "img-src 'self' data:" in csp and "script-src" not in csp
    assert csp != CSP  # the other pages keep theirs
    assert later.text.count('<img src="data:image/svg+xml;base64,') >= 10
    assert "1 census kept" in later.text and "&lt;script&gt;" in later.text
    assert "<script" not in later.text


async def test_no_census_kept_yet(tmp_path: Path) -> None:
    db = tmp_path / "crawl.db"
    connect(db).close()
    app = app_of(db)
    async with browser(app) as web:
        page = await web.get("/census")
        about = await web.get("/about")
    assert app.checks is not None
    app.checks.reads.close()
    assert page.status_code == 200
    assert "No census of the crawl is kept yet" in page.text
    assert "geminibot census --db PATH --keep" in page.text
    assert 'href="/census"' in about.text


async def test_no_census_without_a_database() -> None:
    async with browser(app_of(None)) as web:
        page = await web.get("/census")
    assert page.status_code == 404
