"""Pages changed and gone in the last day, end to end on both stores: a capsule served
over TLS on loopback is crawled at day 0; it then changes one page and removes another,
and is crawled again at day 0.5: ``geminibot stats`` (text and ``--json``) and the search
capsule's ``/stats`` say 1 changed, 0 gone and 1 not found (the removed page answers 51,
which is not "gone"); at day 2 (a fake clock), 0, 0 and 0.

The crawls run on trio's mock clock from a fake wall-clock start; day 0.5 is the real
present, so that ``geminibot stats``, which reads the real clock, counts at it (12 hours
from either edge of the day it counts)."""

from __future__ import annotations

import json
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import trio
from capsule_fixtures import TEST_LIMITS, cert_dir

from capsule_server.testing import running_server
from geminibot.cli import main
from geminibot.crawl.build import build_crawler
from geminibot.crawl.clock import TrioWallClock
from geminibot.crawl.fetcher import gemini_fetch
from geminibot.crawl.progress import Progress
from geminibot.crawl.settings import CrawlOptions
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.urls import parse_request
from geminibot.index import stats
from geminibot.index.freshness import DAY
from geminibot.net.connect import ConnectRule, Resolver
from geminibot.searchcap import SearchCapsule
from geminibot.store.database import open_database

__all__ = ["cert_dir"]  # the fixture, used by name

HOST = "fresh.test"
HOME = f"gemini://{HOST}/"


def capsule(root: Path) -> Path:
    """A capsule whose home links to a page that stays, one that will change and one
    that will go."""
    folder = root / HOST
    folder.mkdir(parents=True)
    (folder / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n")
    (folder / "index.gmi").write_text("# Home\n=> stable.gmi\n=> moving.gmi\n=> doomed.gmi\n")
    (folder / "stable.gmi").write_text("# Stable\nunchanging granite\n")
    (folder / "moving.gmi").write_text("# Moving\nfirst draft\n")
    (folder / "doomed.gmi").write_text("# Doomed\nephemeral mayfly\n")
    return folder


async def crawl(kind: str, db: str, port: int, start: float) -> Progress:
    """Every URL of the capsule (again), the crawl's clock starting at ``start``."""
    resolver = Resolver([ConnectRule("*", 1965, "127.0.0.1", port)], loopback_only=True)
    fetch = gemini_fetch(GeminiClient(connect_to=resolver))
    clock = TrioWallClock(lambda: start)
    options = CrawlOptions(test_range=True, refresh=True)
    lease_seconds = 30.0 if kind == "postgresql" else None
    with (
        open_database(db, write=True, lease_seconds=lease_seconds) as database,
        database.crawl_store(clock.now, options.limits) as store,
    ):
        crawler = build_crawler(store, options, clock, fetch=fetch)
        crawler.seed([HOME])
        return await crawler.run()


async def stats_page(db: str, now: float) -> str:
    """The search capsule's ``/stats`` at ``now``."""
    with closing(SearchCapsule.of(db, wall_clock=lambda: now)) as capsule:
        answer = await capsule(parse_request(b"gemini://search.test/stats\r\n"))
    assert answer.status == 20
    return str(answer.read_body().decode("utf-8"))


def counted(db: str, now: float) -> tuple[int, int, int]:
    with open_database(db) as database:
        figures = stats(database, now)["freshness"]
    return figures["changed_last_day"], figures["gone_last_day"], figures["not_found_last_day"]


def line(changed: int, gone: int, not_found: int) -> str:
    return f"  changed last 24 h    {changed}, gone: {gone}, not found: {not_found}"


async def test_changed_and_gone_in_the_last_day(
    kind: str,
    db: str,
    tmp_path: Path,
    cert_dir: Path,
    loopback_clock: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    day0 = time.time() - DAY / 2
    folder = capsule(tmp_path / "capsules")
    async with running_server(
        folder.parent, cert_dir, TEST_LIMITS, clock=trio.current_time
    ) as server:
        assert server.port is not None
        first = await crawl(kind, db, server.port, day0)
        assert first.pages == 4
        assert counted(db, day0 + 60) == (0, 0, 0)  # first fetches are no change
        (folder / "moving.gmi").write_text("# Moving\nsecond draft, revised\n")
        (folder / "doomed.gmi").unlink()
        again = await crawl(kind, db, server.port, day0 + DAY / 2)
    # The removed page answers 51: not found (asked again later), not gone.
    assert (again.unchanged, again.gone, again.not_found) == (2, 0, 1)

    assert counted(db, day0 + DAY / 2 + 60) == (1, 0, 1)
    assert line(1, 0, 1) in await stats_page(db, day0 + DAY / 2 + 60)
    assert main(["stats", "--db", db]) == 0
    text = capsys.readouterr().out
    assert line(1, 0, 1) in text.splitlines()
    assert all(len(row) <= 80 for row in text.splitlines())
    assert main(["stats", "--db", db, "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)["freshness"]
    assert (figures["changed_last_day"], figures["gone_last_day"]) == (1, 0)
    assert figures["not_found_last_day"] == 1

    assert counted(db, day0 + 2 * DAY) == (0, 0, 0)
    assert line(0, 0, 0) in await stats_page(db, day0 + 2 * DAY)
